package server

import (
	"net/url"
	"testing"
	"time"
)

func FuzzModuleQuery(f *testing.F) {
	for _, s := range []string{
		"", "after=" + "ab12", "after=ab12&wait=30s", "after=ab12&wait=30", "wait=1s", "after=",
		"after=xyz", "after=ab&wait=-1s", "after=ab&wait=1h&x=1", "after=AB12",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		m, err := parseModuleQuery(q, 30*time.Second, 60*time.Second)
		if err != nil {
			checkClean(t, err)
			return
		}
		if m.wait < 0 || m.wait > 60*time.Second {
			t.Fatalf("wait %v outside [0, 60s]", m.wait)
		}
		if m.after == "" && m.wait != 0 {
			t.Fatalf("a wait of %v without after", m.wait)
		}
		if len(m.after) > maxHashParam {
			t.Fatalf("after of %d bytes accepted", len(m.after))
		}
	})
}
