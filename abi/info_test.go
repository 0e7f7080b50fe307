package abi_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/allocd/allocd/abi"
)

func TestInfoJSONRoundTrip(t *testing.T) {
	odd := "q\"uote\\back/slash\n\t\r\x00\x01\x1f\x7f é 组 🚀 \u2028\u2029 <&>"
	in := &abi.Info{
		Name:        "hash" + odd,
		Version:     "1.2.3",
		ABI:         "1.0",
		Description: "RocketMQ CONSISTENT_HASH; " + odd,
		Properties:  []string{abi.PropBalanced, abi.PropSticky, odd},
		Config:      map[string]string{"vnodes": "virtual nodes per consumer (default 10)", odd: odd, "": "empty key"},
		CheckConfig: map[string]string{"consumeridcs": `["IDC1"]`, odd: odd},
	}
	b := in.AppendJSON([]byte("prefix:"))
	if !strings.HasPrefix(string(b), "prefix:") {
		t.Fatalf("AppendJSON did not append")
	}
	b = b[len("prefix:"):]
	if !json.Valid(b) {
		t.Fatalf("AppendJSON wrote invalid JSON: %s", b)
	}
	out, err := abi.ParseInfo(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip\n%+v\nwant\n%+v", out, in)
	}
	// encoding/json reads the same thing.
	var std abi.Info
	if err := json.Unmarshal(b, &std); err != nil || !reflect.DeepEqual(&std, in) {
		t.Fatalf("encoding/json reads %+v (%v)", std, err)
	}
	if !out.Has(abi.PropSticky) || out.Has(abi.PropPartial) {
		t.Errorf("Has: sticky %v, partial %v", out.Has(abi.PropSticky), out.Has(abi.PropPartial))
	}
}

func TestInfoJSONDefaults(t *testing.T) {
	b := (&abi.Info{Name: "avg", Version: "1"}).AppendJSON(nil)
	if want := `{"name":"avg","version":"1","abi":"1.1"}`; string(b) != want {
		t.Errorf("AppendJSON = %s, want %s", b, want)
	}
	b = (&abi.Info{Name: "x", Version: "1", Config: map[string]string{"b": "2", "a": "1"}, Properties: []string{"balanced"}}).AppendJSON(nil)
	if want := `{"name":"x","version":"1","abi":"1.1","properties":["balanced"],"config":{"a":"1","b":"2"}}`; string(b) != want {
		t.Errorf("AppendJSON = %s, want %s", b, want)
	}
	// Invalid UTF-8 becomes U+FFFD, so the output is still valid JSON.
	b = (&abi.Info{Name: "bad\xffutf8\xc3"}).AppendJSON(nil)
	out, err := abi.ParseInfo(b)
	if err != nil || out.Name != "bad\ufffdutf8\ufffd" {
		t.Errorf("ParseInfo(%s) = %+v, %v", b, out, err)
	}
}

func TestParseInfoErrors(t *testing.T) {
	for _, in := range []string{``, `{`, `[]`, `{"version":"1"}`, `{"name":""}`, `{"name":5}`} {
		if _, err := abi.ParseInfo([]byte(in)); err == nil {
			t.Errorf("ParseInfo(%s) accepted", in)
		}
	}
}

// FuzzInfoAppendJSON: whatever the strings, AppendJSON writes valid JSON that reads back the same
// (invalid UTF-8 excepted, which becomes U+FFFD).
func FuzzInfoAppendJSON(f *testing.F) {
	f.Add("hash", "1.0.0", "desc \"q\" \n", "balanced", "vnodes", "10")
	f.Add("\x00\xff", "\u2028", "🚀", "", "", "")
	f.Fuzz(func(t *testing.T, name, version, desc, prop, key, value string) {
		in := &abi.Info{Name: name, Version: version, ABI: "1.0", Description: desc, Config: map[string]string{key: value}}
		if prop != "" {
			in.Properties = []string{prop}
		}
		b := in.AppendJSON(nil)
		if !json.Valid(b) {
			t.Fatalf("invalid JSON: %q", b)
		}
		var out abi.Info
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{name, version, desc, prop, key, value} {
			if !utf8.ValidString(s) {
				return
			}
		}
		if !reflect.DeepEqual(&out, in) {
			t.Fatalf("round trip %+v, want %+v", out, in)
		}
	})
}
