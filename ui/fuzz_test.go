package ui_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/allocd/allocd/ui"
)

// Any address under /ui/ answers a page or a clear error, never a panic nor a 500, and never
// echoes what it was given unescaped.
func FuzzPage(f *testing.F) {
	for _, s := range []string{"/ui/groups?q=g&sort=lag", "/ui/groups/g?view=table&queue=T/broker-a/1", "/ui/groups/<script>", "/ui/groups/g/x",
		"/ui/plugins", "/ui/topics?fragment=1", "/ui/groups/%zz", "/ui/events?page=/ui/groups/%3Cb%3E", "/ui/groups/" + strings.Repeat("a", 200)} {
		f.Add(s)
	}
	e := newEnv(f, ui.Admin)
	h := e.ts.Config.Handler
	f.Fuzz(func(t *testing.T, path string) {
		u, err := url.Parse(path)
		if err != nil || !strings.HasPrefix(u.Path, "/ui/") || u.Path == "/ui/events" && u.Query().Get("page") == "" {
			return
		}
		if u.Path == "/ui/events" {
			return // a stream: TestEventsFollowChanges and TestErrors cover it
		}
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL = u
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("GET %q: %d %s", path, rec.Code, rec.Body)
		}
		if body := rec.Body.String(); strings.Count(body, "<script") > 1 || strings.Contains(body, "<img") {
			t.Fatalf("GET %q: the answer holds markup of the address: %s", path, body)
		}
	})
}
