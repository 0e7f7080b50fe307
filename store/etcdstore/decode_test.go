package etcdstore

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// decodeVersion reads records from etcd, which anyone with access may have written: it never
// panics, and what it accepts is a version Kept can read within MaxModule.
func FuzzDecodeVersion(f *testing.F) {
	h := strings.Repeat("ab", 32)
	f.Add([]byte(`{"hash":"` + h + `","size":10,"chunks":["` + h + `"]}`))
	f.Add([]byte(`{"hash":"` + h + `","size":0,"chunks":[]}`))
	f.Add([]byte(`{"hash":"` + h + `","size":99999999999,"chunks":["` + h + `"]}`))
	f.Add([]byte(`{"hash":"AB","size":1,"chunks":["x"]}`))
	f.Add([]byte(`{half`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeVersion("k", b)
		if err != nil {
			if !strings.Contains(err.Error(), `"k"`) {
				t.Fatalf("error does not name the key: %v", err)
			}
			return
		}
		if !isHash(v.Hash) || v.Size <= 0 || v.Size > MaxModule || len(v.Chunks) == 0 || len(v.Chunks) > v.Size {
			t.Fatalf("accepted %+v", v)
		}
		for _, c := range v.Chunks {
			if !isHash(c) {
				t.Fatalf("accepted chunk %q", c)
			}
		}
		again, _ := json.Marshal(v)
		if w, err := decodeVersion("k", again); err != nil || w.Hash != v.Hash || w.Size != v.Size || len(w.Chunks) != len(v.Chunks) {
			t.Fatalf("re-encoded %s reads back as %+v, %v", again, w, err)
		}
	})
}

func FuzzDecodeSeq(f *testing.F) {
	for _, s := range []string{"0", "1", "18446744073709551614", "18446744073709551615", "-1", " 1", "1e3", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := decodeSeq("k", b)
		if err != nil {
			if !strings.Contains(err.Error(), `"k"`) {
				t.Fatalf("error does not name the key: %v", err)
			}
			return
		}
		if n == 1<<64-1 || strconv.FormatUint(n, 10) != strings.TrimLeft(string(b), "0") && n != 0 {
			t.Fatalf("%q read as %d", b, n)
		}
	})
}
