package plugin_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/abi/plugin"
)

// calls records the arguments the strategy saw, one line per consumer.
var calls []string

// TestMain registers the strategy once: Register panics when called twice in one process.
func TestMain(m *testing.M) {
	plugin.RegisterPrepared(plugin.Info{Name: "round-robin", Version: "0.0.1"}, func(req *abi.View) (plugin.Func, error) {
		if reason, ok := req.Config("fail"); ok {
			return nil, errors.New(reason)
		}
		return roundRobin, nil
	})
	os.Exit(m.Run())
}

// roundRobin gives queue i to consumer i mod len(cidAll) and refuses consumers that are not in
// the group, so a test sees both kinds of result.
func roundRobin(a *plugin.Args, dst []int) ([]int, error) {
	zone, _ := a.Request.ConsumerLabel(max(a.Self, 0), "zone")
	calls = append(calls, fmt.Sprintf("%s/%s/%d/%d/%d/%s/%s", a.Group, a.CID, a.Self, a.MQAll.Len(), a.CIDAll.Len(), a.Config("stride", "1"), zone))
	if a.Self < 0 {
		return dst, fmt.Errorf("consumer %q is not in cidAll", a.CID)
	}
	if a.CIDAll.At(a.Self) != a.CID {
		return dst, fmt.Errorf("Self %d is %q, not %q", a.Self, a.CIDAll.At(a.Self), a.CID)
	}
	for i := 0; i < a.MQAll.Len(); i++ {
		if i%a.CIDAll.Len() == a.Self && a.MQAll.At(i).Topic == "T" {
			dst = append(dst, i)
		}
	}
	return dst, nil
}

func allocate(t *testing.T, r *abi.Request) (*abi.Response, error) {
	t.Helper()
	in, err := abi.EncodeRequest(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	calls = nil
	out, err := plugin.Allocate(in)
	if err != nil {
		if out != nil {
			t.Errorf("a failed call returned output %x", out)
		}
		return nil, err
	}
	var resp abi.Response
	if err := abi.DecodeResponse(out, &resp); err != nil {
		t.Fatalf("the SDK wrote a response the codec refuses: %v", err)
	}
	if err := abi.Validate(r, &resp); err != nil {
		t.Fatalf("the SDK's answer fails validation: %v", err)
	}
	return &resp, nil
}

func queues(n int) []abi.Queue {
	out := make([]abi.Queue, n)
	for i := range out {
		out[i] = abi.Queue{Topic: "T", BrokerName: "b", QueueID: int32(i)}
	}
	return out
}

func ok(idx ...int) abi.Result { return abi.Result{Indices: idx} }

func TestAllocateWholeGroup(t *testing.T) {
	resp, err := allocate(t, &abi.Request{
		Group: "g", Queues: queues(5), Consumers: []string{"c1", "c2"},
		ConsumerAttrs: []abi.Attrs{{Labels: map[string]string{"zone": "east"}}, {}},
		Config:        map[string]string{"stride": "2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &abi.Response{Results: []abi.Result{ok(0, 2, 4), ok(1, 3)}}
	if !resp.Equal(want) {
		t.Errorf("answer %+v, want %+v", resp, want)
	}
	if got, want := strings.Join(calls, " "), "g/c1/0/5/2/2/east g/c2/1/5/2/2/"; got != want {
		t.Errorf("the strategy saw %s, want %s", got, want)
	}
}

func TestAllocateTargetsWithErrors(t *testing.T) {
	for range 3 { // repeated calls behave the same
		resp, err := allocate(t, &abi.Request{
			Group: "g", Queues: queues(4), Consumers: []string{"c1", "c2", "c2"},
			Targets: []string{"c2", "c9", "c1", "c2"},
		})
		if err != nil {
			t.Fatal(err)
		}
		want := &abi.Response{Results: []abi.Result{
			ok(1),
			{Failed: true, Err: `consumer "c9" is not in cidAll`},
			ok(0, 3),
			ok(1),
		}}
		if !resp.Equal(want) {
			t.Errorf("answer %+v, want %+v", resp, want)
		}
		if got, want := strings.Join(calls, " "), "g/c2/1/4/3/1/ g/c9/-1/4/3/1/ g/c1/0/4/3/1/ g/c2/1/4/3/1/"; got != want {
			t.Errorf("the strategy saw %s, want %s", got, want)
		}
	}
}

func TestAllocateEmpty(t *testing.T) {
	resp, err := allocate(t, &abi.Request{Group: "g", Consumers: []string{"c1"}, Targets: []string{}})
	if err != nil || len(resp.Results) != 0 || len(calls) != 0 {
		t.Errorf("an empty target list: %+v, %v, calls %v", resp, err, calls)
	}
	resp, err = allocate(t, &abi.Request{Group: "g", Consumers: []string{"c1"}})
	if err != nil || !resp.Equal(&abi.Response{Results: []abi.Result{ok()}}) {
		t.Errorf("no queues: %+v, %v", resp, err)
	}
}

func TestAllocateWholeCallFailure(t *testing.T) {
	_, err := allocate(t, &abi.Request{Group: "g", Queues: queues(2), Consumers: []string{"c1"}, Config: map[string]string{"fail": "ring has no nodes"}})
	if err == nil || err.Error() != "ring has no nodes" {
		t.Errorf("a failing Prepare: %v", err)
	}
	if len(calls) != 0 {
		t.Errorf("the strategy ran after Prepare failed: %v", calls)
	}
	if _, err := plugin.Allocate([]byte("not a request")); err == nil || !strings.HasPrefix(err.Error(), "abi: ") {
		t.Errorf("a malformed request: %v", err)
	}
	// A queue record naming a string the request lacks passes parsing (queue records are
	// checked as they are read), but a strategy that reads it fails the whole call: what it
	// computed from the empty names it was given is never answered.
	in, err := abi.EncodeRequest(nil, &abi.Request{Group: "g", Queues: queues(3), Consumers: []string{"c1", "c2"}})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := abi.ParseRequest(in)
	topic := uint32(bytes.Index(in, []byte{1, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0})) // queue 2: strings 1 and 2, id 2
	if v.Queue(2) != (abi.Queue{Topic: "T", BrokerName: "b", QueueID: 2}) || topic == ^uint32(0) {
		t.Fatalf("queue 2's record not found in %x", in)
	}
	binary.LittleEndian.PutUint32(in[topic:], 77)
	if out, err := plugin.Allocate(in); err == nil || !strings.Contains(err.Error(), "queue 2 names topic string 77") {
		t.Errorf("a bad queue record: output %x, error %v", out, err)
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("a second Register did not panic")
		}
		// The first registration still serves.
		if _, err := allocate(t, &abi.Request{Group: "g", Queues: queues(1), Consumers: []string{"c1"}}); err != nil {
			t.Errorf("after the refused Register: %v", err)
		}
	}()
	plugin.Register(plugin.Info{Name: "second"}, roundRobin)
}

// FuzzAllocate: the SDK never panics on any input, and whatever it answers is a well-formed
// response with one result per target of a request that parses.
func FuzzAllocate(f *testing.F) {
	for _, r := range []*abi.Request{
		{Group: "g", Queues: queues(5), Consumers: []string{"c1", "c2"}},
		{Group: "g", Queues: queues(4), Consumers: []string{"c1", "c2", "c2"}, Targets: []string{"c2", "c9"}},
		{Group: "g", Queues: queues(2), Consumers: []string{"c1"}, Config: map[string]string{"stride": "2"},
			ConsumerAttrs: []abi.Attrs{{Labels: map[string]string{"zone": "east"}}}},
	} {
		b, err := abi.EncodeRequest(nil, r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		calls = nil // the strategy's record of its arguments, not wanted here
		out, err := plugin.Allocate(in)
		if err != nil {
			return
		}
		v, perr := abi.ParseRequest(in)
		if perr != nil {
			t.Fatalf("the SDK answered a request the codec refuses: %v", perr)
		}
		var resp abi.Response
		if err := abi.DecodeResponse(out, &resp); err != nil {
			t.Fatalf("the SDK wrote a response the codec refuses: %v", err)
		}
		if len(resp.Results) != v.NumTargets() {
			t.Fatalf("%d results for %d targets", len(resp.Results), v.NumTargets())
		}
	})
}
