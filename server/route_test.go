package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/server"
)

// The heartbeat's route beside the mux answers every request exactly as the mux alone does,
// and takes the plain heartbeat paths: escapes, dot segments, other characters, other methods
// and other paths are the mux's.
func TestHeartbeatRouteIsTheMux(t *testing.T) {
	e := newEnv(t, nil)
	e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	for _, g := range []string{"g", "G_x-1", "a|b", "a%b"} {
		e.do("PUT", "/v1/groups/"+strings.ReplaceAll(strings.ReplaceAll(g, "%", "%25"), "|", "%7C"), `{"strategy":"averagely"}`, nil)
	}
	body := `{"cid":"c1","topics":["T"]}`
	for _, c := range []struct {
		method, target string
		fast           string // the group the route takes, "" for the mux's
	}{
		{"POST", "/v1/groups/g/heartbeat", "g"},
		{"POST", "/v1/groups/G_x-1/heartbeat", "G_x-1"},
		{"POST", "/v1/groups/g/heartbeat?debug=1", "g"},
		{"POST", "/v1/groups/nosuch/heartbeat", "nosuch"},
		{"POST", "/v1/groups/a%7Cb/heartbeat", ""},
		{"POST", "/v1/groups/a%25b/heartbeat", ""},
		{"POST", "/v1/groups/%67/heartbeat", ""},
		{"POST", "/v1/groups//heartbeat", ""},
		{"POST", "/v1/groups/./heartbeat", ""},
		{"POST", "/v1/groups/../heartbeat", ""},
		{"POST", "/v1/groups/g/../g/heartbeat", ""},
		{"POST", "/v1/groups/g/x/heartbeat", ""},
		{"POST", "/v1/groups/heartbeat", ""},
		{"POST", "/v1/groups/g/heartbeat/", ""},
		{"POST", "/v1/groups/g.h/heartbeat", ""},
		{"GET", "/v1/groups/g/heartbeat", ""},
		{"PUT", "/v1/groups/g/heartbeat", ""},
		{"POST", "/v1/groups/g/leave", ""},
	} {
		serve := func(h http.Handler) *httptest.ResponseRecorder {
			e.clock.Advance(time.Millisecond)
			req := httptest.NewRequest(c.method, c.target, strings.NewReader(body))
			if got, ok := server.HeartbeatGroup(req); got != c.fast || ok != (c.fast != "") {
				t.Errorf("%s %s: heartbeat route takes %q, %v; want %q", c.method, c.target, got, ok, c.fast)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w
		}
		got, want := serve(e.s.Handler()), serve(e.s.Mux())
		if got.Code != want.Code || got.Body.String() != want.Body.String() || got.Header().Get("Location") != want.Header().Get("Location") ||
			got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
			t.Errorf("%s %s: %d %q %v, the mux answers %d %q %v", c.method, c.target, got.Code, got.Body, got.Header(), want.Code, want.Body, want.Header())
		}
	}
	// Both count heartbeats under the route's label: the six answered 200 (g, G_x-1, g?debug=1,
	// a|b, a%b and %67, which is g), each served twice.
	if n := requestCount(t, e, "POST /v1/groups/{group}/heartbeat", "200"); n != 12 {
		t.Errorf("heartbeats counted: %v, want 12", n)
	}
}
