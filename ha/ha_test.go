package ha

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestDeadlineFromSendTime(t *testing.T) {
	clk := newFakeClock()
	const ttl = 2 * time.Second
	d := NewDeadline(DefaultMargin(ttl)) // 500 ms
	if d.Valid(clk.Now()) {
		t.Fatal("a deadline never renewed is valid")
	}
	sent := clk.Now()
	clk.Advance(300 * time.Millisecond) // the answer comes back 300 ms later
	d.Renewed(sent, ttl)
	if want := sent.Add(1500 * time.Millisecond); !d.Until().Equal(want) {
		t.Fatalf("deadline %v, want send time + TTL - margin = %v", d.Until(), want)
	}
	clk.Advance(1199 * time.Millisecond) // 1.499 s after the send
	if !d.Valid(clk.Now()) {
		t.Fatal("invalid 1 ms before the deadline")
	}
	clk.Advance(time.Millisecond)
	if d.Valid(clk.Now()) {
		t.Fatal("still valid at the deadline: a replica would serve while etcd may have let the lease go")
	}
}

func TestDeadlineKeepAlivesKeepItValid(t *testing.T) {
	clk := newFakeClock()
	const ttl = 2 * time.Second
	d := NewDeadline(DefaultMargin(ttl))
	// Keep-alives every TTL/3 answered at once: valid throughout.
	for range 30 {
		d.Renewed(clk.Now(), ttl)
		clk.Advance(ttl / 3)
		if !d.Valid(clk.Now()) {
			t.Fatalf("invalid at %v although a keep-alive was answered %v ago", clk.Now(), ttl/3)
		}
	}
	// An answer to an older keep-alive that arrives late never shortens it.
	until := d.Until()
	d.Renewed(clk.Now().Add(-time.Second), ttl)
	if !d.Until().Equal(until) {
		t.Fatalf("a late answer moved the deadline from %v to %v", until, d.Until())
	}
	// A zero TTL (the lease is gone) does not extend it.
	d.Renewed(clk.Now(), 0)
	if !d.Until().Equal(until) {
		t.Fatal("a TTL of 0 moved the deadline")
	}
	d.Clear()
	if d.Valid(clk.Now()) {
		t.Fatal("valid after Clear")
	}
}

// A leader paused for longer than its TTL finds its deadline passed the moment it wakes, before
// any timer of its own has fired: nothing has to run for it to stop serving.
func TestDeadlinePausedLeaderWakesInvalid(t *testing.T) {
	clk := newFakeClock()
	const ttl = 2 * time.Second
	d := NewDeadline(DefaultMargin(ttl))
	d.Renewed(clk.Now(), ttl)
	clk.Advance(5 * time.Second) // SIGSTOP ... SIGCONT
	if d.Valid(clk.Now()) {
		t.Fatal("a leader paused 5 s on a 2 s lease still counts as leading")
	}
}

func TestDefaultMargin(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{2 * time.Second, 500 * time.Millisecond},
		{10 * time.Second, 2500 * time.Millisecond},
		{200 * time.Millisecond, 100 * time.Millisecond},
	} {
		if got := DefaultMargin(c.ttl); got != c.want {
			t.Errorf("DefaultMargin(%v) = %v, want %v", c.ttl, got, c.want)
		}
	}
}

// clockLeadership leads until its Deadline passes on a fake clock.
type clockLeadership struct {
	clk    *fakeClock
	d      *Deadline
	mu     sync.Mutex
	leader string
}

func (l *clockLeadership) Leading() bool { return l.d.Valid(l.clk.Now()) }

func (l *clockLeadership) Leader() (Role, string) {
	if l.Leading() {
		return RoleLeader, "http://self"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leader == "" {
		return RoleCandidate, ""
	}
	return RoleFollower, l.leader
}

func newClockLeadership() *clockLeadership {
	l := &clockLeadership{clk: newFakeClock(), d: NewDeadline(500 * time.Millisecond)}
	l.d.Renewed(l.clk.Now(), 2*time.Second)
	return l
}

func get(t *testing.T, url string, hdr http.Header) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("GET %s: %d %q is not JSON", url, resp.StatusCode, b)
	}
	return resp.StatusCode, resp.Header, m
}

// A long-poll that began in a term and answers after the deadline passed sends 503, not its
// assignment.
func TestRouterDropsAnswerOfEndedTerm(t *testing.T) {
	l := newClockLeadership()
	started, release := make(chan struct{}), make(chan struct{})
	rt := NewRouter(l, "http://self", http.NotFoundHandler())
	rt.SetLeading(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/wait" {
			close(started)
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"generation":7}`)
	}), 42)
	srv := httptest.NewServer(rt)
	defer srv.Close()

	if code, h, body := get(t, srv.URL+"/v1/now", nil); code != 200 || body["generation"] != 7.0 || h.Get(LeaderHeader) != "http://self" || h.Get(TermHeader) != "42" {
		t.Fatalf("a leader within its deadline answered %d %v (leader header %q)", code, body, h.Get(LeaderHeader))
	}
	type result struct {
		code int
		hdr  http.Header
		body map[string]any
	}
	done := make(chan result)
	go func() {
		code, h, body := get(t, srv.URL+"/v1/wait", nil)
		done <- result{code, h, body}
	}()
	<-started
	l.clk.Advance(3 * time.Second) // paused past the deadline mid-wait
	close(release)
	r := <-done
	if r.code != http.StatusServiceUnavailable || r.hdr.Get("Retry-After") == "" || r.body["generation"] != nil {
		t.Fatalf("the ended term's long-poll answered %d %v (Retry-After %q), want 503 with Retry-After and no assignment", r.code, r.body, r.hdr.Get("Retry-After"))
	}
	if !strings.Contains(r.body["error"].(string), "term ended") || r.hdr.Get(LeaderHeader) != "" || r.hdr.Get(TermHeader) != "" {
		t.Fatalf("503 body %v, leader header %q", r.body, r.hdr.Get(LeaderHeader))
	}
	// And nothing more is served from memory: no leader known, so 503 everywhere but the
	// replica's own endpoints.
	if code, _, body := get(t, srv.URL+"/v1/now", nil); code != 503 || !strings.Contains(body["error"].(string), "no leader") {
		t.Fatalf("after the deadline a new call answered %d %v", code, body)
	}
	if code, _, body := get(t, srv.URL+"/readyz", nil); code != 503 || body["role"] != string(RoleCandidate) {
		t.Fatalf("/readyz without a leader: %d %v", code, body)
	}
	if code, _, _ := get(t, srv.URL+"/healthz", nil); code != 200 {
		t.Fatalf("/healthz without a leader: %d", code)
	}
}

// A follower proxies to the leader; a request already forwarded is not forwarded again; a
// leader that does not answer costs a 503 with Retry-After.
func TestRouterFollowerProxies(t *testing.T) {
	var gotFwd string
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotFwd = r.Header.Get(ForwardedHeader)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"from":"leader","path":"`+r.URL.Path+`"}`)
	}))
	defer leader.Close()
	l := newClockLeadership()
	l.d.Clear()
	l.leader = leader.URL
	rt := NewRouter(l, "http://follower", http.NotFoundHandler())
	srv := httptest.NewServer(rt)
	defer srv.Close()

	if code, _, body := get(t, srv.URL+"/v1/groups/g", nil); code != 200 || body["from"] != "leader" || body["path"] != "/v1/groups/g" {
		t.Fatalf("follower answered %d %v, want the leader's answer", code, body)
	}
	if gotFwd != "http://follower" {
		t.Fatalf("forwarded header %q", gotFwd)
	}
	if code, _, body := get(t, srv.URL+"/readyz", nil); code != 200 || body["role"] != "follower" || body["leader"] != leader.URL {
		t.Fatalf("follower /readyz: %d %v", code, body)
	}
	if code, _, body := get(t, srv.URL+"/v1/groups/g", http.Header{ForwardedHeader: {"http://other"}}); code != 503 || !strings.Contains(body["error"].(string), "forwarded") {
		t.Fatalf("a forwarded request at a follower: %d %v", code, body)
	}
	leader.Close()
	code, h, body := get(t, srv.URL+"/v1/groups/g", nil)
	if code != 503 || h.Get("Retry-After") == "" || !strings.Contains(body["error"].(string), "did not answer") {
		t.Fatalf("a dead leader behind a follower: %d %v", code, body)
	}
}

func TestRouterLeaderReadyz(t *testing.T) {
	l := newClockLeadership()
	rt := NewRouter(l, "http://self", http.NotFoundHandler())
	rt.SetLeading(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		io.WriteString(w, `{"error":"not ready: plugin x"}`)
	}), 42)
	srv := httptest.NewServer(rt)
	defer srv.Close()
	if code, _, body := get(t, srv.URL+"/readyz", nil); code != 503 || body["role"] != "leader" || body["term"] != "42" || body["error"] != "not ready: plugin x" {
		t.Fatalf("leader /readyz: %d %v", code, body)
	}
}
