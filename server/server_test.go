package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/internal/nativestrategy"
	"github.com/allocd/allocd/server"
	"github.com/allocd/allocd/store"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

type plugins struct{}

func (plugins) List() any { return []map[string]string{{"name": "averagely"}, {"name": "circle"}} }
func (plugins) Get(name string) (any, bool) {
	if name == "averagely" || name == "circle" {
		return map[string]string{"name": name}, true
	}
	return nil, false
}

// diskFull fails every topic write with ENOSPC.
type diskFull struct{ store.Store }

func (diskFull) PutTopic(store.Topic) error {
	return &store.Error{Op: `put topic "T"`, Err: syscall.ENOSPC}
}

type env struct {
	t     *testing.T
	c     *coordinator.Coordinator
	s     *server.Server
	ts    *httptest.Server
	clock *fakeClock
	reg   *prometheus.Registry
}

func newEnv(t *testing.T, wrap func(store.Store) store.Store) *env {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var s store.Store = st
	if wrap != nil {
		s = wrap(st)
	}
	e := &env{t: t, clock: &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}, reg: prometheus.NewRegistry()}
	e.c, err = coordinator.New(coordinator.Options{
		Store: s, Allocator: nativestrategy.Allocator{}, Clock: e.clock, Metrics: e.reg, SessionTimeout: 10 * time.Second,
		CheckStrategy: func(name string) error {
			if _, ok := (plugins{}).Get(name); !ok {
				return errors.New("no such plugin (loaded: averagely, circle)")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.s, err = server.New(server.Options{Coordinator: e.c, Plugins: plugins{}, Gatherer: e.reg, Metrics: e.reg, MaxBody: 4096, MaxWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.ts = httptest.NewServer(e.s.Handler())
	t.Cleanup(e.ts.Close)
	return e
}

// do sends a request and decodes the JSON answer into out (if not nil); it returns the status.
func (e *env) do(method, path, body string, out any) int {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: %v in %q", method, path, err, b)
		}
	}
	if resp.StatusCode >= 400 && resp.Header.Get("Content-Type") != "application/json" {
		e.t.Errorf("%s %s: error with Content-Type %q: %s", method, path, resp.Header.Get("Content-Type"), b)
	}
	return resp.StatusCode
}

// expectError checks a request's status and that its JSON error contains want.
func (e *env) expectError(method, path, body string, status int, want string) {
	e.t.Helper()
	var got struct{ Error string }
	if code := e.do(method, path, body, &got); code != status || !strings.Contains(got.Error, want) {
		e.t.Errorf("%s %s %s: %d %q, want %d with %q", method, path, body, code, got.Error, status, want)
	}
}

func (e *env) tick(d time.Duration) {
	e.clock.Advance(d)
	e.c.Tick(context.Background())
}

const topicT = `{"brokers":[{"name":"broker-b","readQueues":2,"writeQueues":2},{"name":"broker-a","readQueues":2,"writeQueues":1}]}`

func TestTopics(t *testing.T) {
	e := newEnv(t, nil)
	var topic coordinator.Topic
	if code := e.do("PUT", "/v1/topics/T", topicT, &topic); code != http.StatusCreated || topic.Brokers[0].Name != "broker-a" {
		t.Fatalf("PUT a new topic: %d %+v", code, topic)
	}
	if code := e.do("PUT", "/v1/topics/T", topicT, nil); code != http.StatusOK {
		t.Fatalf("PUT the same topic again: %d", code)
	}
	if code := e.do("GET", "/v1/topics/T", "", &topic); code != http.StatusOK || len(topic.Brokers) != 2 {
		t.Fatalf("GET: %d %+v", code, topic)
	}
	var list struct{ Topics []coordinator.Topic }
	if code := e.do("GET", "/v1/topics", "", &list); code != http.StatusOK || len(list.Topics) != 1 {
		t.Fatalf("list: %d %+v", code, list)
	}
	var route struct {
		Topic  string
		Queues []abi.Queue
		Key    *string
		Queue  *abi.Queue
	}
	if code := e.do("GET", "/v1/topics/T/route", "", &route); code != http.StatusOK || len(route.Queues) != 3 || route.Queue != nil {
		t.Fatalf("route: %d %+v", code, route)
	}
	// Java's "hello".hashCode() % 3 == 1: the second writable queue, broker-b's queue 0.
	if code := e.do("GET", "/v1/topics/T/route?key=hello", "", &route); code != http.StatusOK ||
		route.Queue == nil || *route.Queue != (abi.Queue{Topic: "T", BrokerName: "broker-b", QueueID: 0}) || *route.Key != "hello" {
		t.Fatalf("route by key: %d %+v", code, route)
	}
	if code := e.do("DELETE", "/v1/topics/T", "", nil); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d", code)
	}
	e.expectError("DELETE", "/v1/topics/T", "", http.StatusNotFound, `topic "T" not found`)
	e.expectError("GET", "/v1/topics/T", "", http.StatusNotFound, `topic "T" not found`)
	e.expectError("GET", "/v1/topics/T/route", "", http.StatusNotFound, `topic "T" not found`)
	e.do("PUT", "/v1/topics/E", `{"brokers":[{"name":"b","readQueues":1,"writeQueues":0}]}`, nil)
	e.expectError("GET", "/v1/topics/E/route?key=k", "", http.StatusConflict, "no writable queues")
}

func TestValidation(t *testing.T) {
	e := newEnv(t, nil)
	e.expectError("PUT", "/v1/topics/a%20b", topicT, http.StatusBadRequest, `topic name "a b" has ' '`)
	e.expectError("PUT", "/v1/topics/T", `{"brokers":[{"name":"a","readQueues":8,"writeQueue":8}]}`, http.StatusBadRequest, `unknown field "writeQueue"`)
	e.expectError("PUT", "/v1/topics/T", `{"brokers":[{"name":"a","readQueues":"8"}]}`, http.StatusBadRequest, `field "brokers.readQueues": JSON string where an integer is wanted`)
	e.expectError("PUT", "/v1/topics/T", `{"brokers":[`, http.StatusBadRequest, "ends inside a JSON value")
	e.expectError("PUT", "/v1/topics/T", `{"brokers":[]}{}`, http.StatusBadRequest, "data after its JSON value")
	e.expectError("PUT", "/v1/topics/T", `[1]`, http.StatusBadRequest, "want an object")
	e.expectError("PUT", "/v1/topics/T", `{"brokers":x}`, http.StatusBadRequest, "not valid JSON")
	e.expectError("PUT", "/v1/topics/T", "", http.StatusBadRequest, "request body is empty")
	e.expectError("PUT", "/v1/topics/T", `{"brokers":[{"name":"a","readQueues":-1}]}`, http.StatusBadRequest, "readQueues -1 is outside [0, 1024]")
	e.expectError("PUT", "/v1/topics/T", `{"brokers":[{"name":"`+strings.Repeat("a", 5000)+`"}]}`, http.StatusRequestEntityTooLarge, "exceeds 4096 bytes")
	e.expectError("PUT", "/v1/groups/g", `{"strategy":"nosuch"}`, http.StatusBadRequest, `strategy "nosuch": no such plugin`)
	e.expectError("PUT", "/v1/groups/g", `{"strategy":"averagely","model":"fanout"}`, http.StatusBadRequest, `model "fanout"`)
	e.expectError("PUT", "/v1/groups/g", `{"strategy":"averagely","name":"g"}`, http.StatusBadRequest, `unknown field "name"`)
	e.do("PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	e.expectError("POST", "/v1/groups/g/heartbeat", `{"cid":""}`, http.StatusBadRequest, "cid is empty")
	e.expectError("POST", "/v1/groups/g/heartbeat", `{"cid":"c\u0001"}`, http.StatusBadRequest, "control character")
	// encoding/json turns invalid UTF-8 and lone surrogates into U+FFFD, which made "c\xffx"
	// and "c\xfex" one member: both are refused before decoding.
	e.expectError("POST", "/v1/groups/g/heartbeat", "{\"cid\":\"c\xffx\"}", http.StatusBadRequest, "not valid UTF-8 (byte 9)")
	e.expectError("POST", "/v1/groups/g/heartbeat", `{"cid":"c\ud800x"}`, http.StatusBadRequest, `lone surrogate escape \ud800`)
	e.expectError("POST", "/v1/groups/g/heartbeat", `{"cid":"c\udc00"}`, http.StatusBadRequest, `lone surrogate escape \udc00`)
	e.expectError("POST", "/v1/groups/g/heartbeat", `{"cid":"c\\ud800"}`, http.StatusOK, "") // an escaped backslash, then text
	if code := e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c\ud83d\ude00"}`, nil); code != http.StatusOK {
		t.Errorf("a surrogate pair: %d", code)
	}
	e.expectError("PUT", "/v1/topics/W", `{"brokers":[{"name":"a","readQueues":1,"writeQueues":8}]}`, http.StatusBadRequest, "which no consumer reads")
	e.expectError("POST", "/v1/groups/g/heartbeat", `{"cid":"c","topics":["T"],"labels":{"weight":"x"}}`, http.StatusBadRequest, `label weight "x"`)
	e.expectError("POST", "/v1/groups/g/heartbeat", `{"cid":"c","topic":["T"]}`, http.StatusBadRequest, `unknown field "topic"`)
	e.expectError("POST", "/v1/groups/nosuch/heartbeat", `{"cid":"c"}`, http.StatusNotFound, `group "nosuch" not found`)
	e.expectError("POST", "/v1/groups/g/leave", `{}`, http.StatusBadRequest, "cid is empty")
	e.expectError("GET", "/v1/groups/g/assignment", "", http.StatusBadRequest, "cid is empty")
	e.expectError("GET", "/v1/groups/g/assignment?cid=c&after=x", "", http.StatusBadRequest, `after="x"`)
	e.expectError("GET", "/v1/groups/g/assignment?cid=c&wait=soon", "", http.StatusBadRequest, `wait="soon"`)
	e.expectError("GET", "/v1/groups/g/assignment?cid=c", "", http.StatusNotFound, `member "c" of group "g" not found`)
	e.expectError("POST", "/v1/topics/T", "", http.StatusMethodNotAllowed, "allowed: PUT, GET, DELETE")
	e.expectError("GET", "/v2/topics", "", http.StatusNotFound, "no such endpoint")
	e.expectError("GET", "/v1/plugins/nosuch", "", http.StatusNotFound, `plugin "nosuch" not found`)
}

func TestGroupLifecycle(t *testing.T) {
	e := newEnv(t, nil)
	e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	var g coordinator.Group
	if code := e.do("PUT", "/v1/groups/g", `{"strategy":"averagely","config":{},"model":"clustering","delivery":"queue"}`, &g); code != http.StatusCreated || g.Strategy != "averagely" {
		t.Fatalf("PUT group: %d %+v", code, g)
	}
	var a coordinator.Assignment
	for _, cid := range []string{"c1", "c2"} {
		if code := e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"`+cid+`","topics":["T"],"instanceId":"","labels":{},"generations":{}}`, &a); code != http.StatusOK {
			t.Fatalf("heartbeat: %d", code)
		}
	}
	if a.Generations["T"] != 0 || len(a.Queues["T"]) != 0 {
		t.Fatalf("assignment before the first generation: %+v", a)
	}
	e.tick(time.Second)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c2","topics":["T"],"generations":{"T":0}}`, &a)
	if a.Generations["T"] != 1 || !slices.Equal(a.Queues["T"], []abi.Queue{{Topic: "T", BrokerName: "broker-a", QueueID: 2}, {Topic: "T", BrokerName: "broker-a", QueueID: 3}}) {
		t.Fatalf("c2's assignment: %+v", a)
	}
	var status coordinator.GroupStatus
	if code := e.do("GET", "/v1/groups/g", "", &status); code != http.StatusOK || len(status.Members) != 2 || len(status.Topics["T"].Assignment) != 2 || status.Members[1].Generations["T"] != 0 {
		t.Fatalf("GET group: %d %+v", code, status)
	}
	var preview coordinator.Preview
	if code := e.do("POST", "/v1/groups/g/preview", `{"strategy":"circle"}`, &preview); code != http.StatusOK || len(preview.Topics["T"].Moves) != 2 {
		t.Fatalf("preview: %d %+v", code, preview)
	}
	var left struct{ Removed bool }
	if code := e.do("POST", "/v1/groups/g/leave", `{"cid":"c1"}`, &left); code != http.StatusOK || !left.Removed {
		t.Fatalf("leave: %d %+v", code, left)
	}
	var groups struct{ Groups []coordinator.GroupSummary }
	if e.do("GET", "/v1/groups", "", &groups); len(groups.Groups) != 1 || groups.Groups[0].Members != 1 {
		t.Fatalf("list groups: %+v", groups)
	}
	if code := e.do("DELETE", "/v1/groups/g", "", nil); code != http.StatusNoContent {
		t.Fatalf("DELETE group: %d", code)
	}
	e.expectError("GET", "/v1/groups/g", "", http.StatusNotFound, `group "g" not found`)
}

func TestLongPoll(t *testing.T) {
	e := newEnv(t, nil)
	e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	e.do("PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c1","topics":["T"]}`, nil)

	// Without after, the answer is immediate.
	var a coordinator.Assignment
	if code := e.do("GET", "/v1/groups/g/assignment?cid=c1", "", &a); code != http.StatusOK || a.Generations["T"] != 0 {
		t.Fatalf("immediate poll: %d %+v", code, a)
	}
	done := make(chan coordinator.Assignment)
	go func() {
		var a coordinator.Assignment
		e.do("GET", "/v1/groups/g/assignment?cid=c1&topic=T&after=0&wait=30s", "", &a)
		done <- a
	}()
	// The poll must be waiting before the generation appears; a new one wakes it either way,
	// but a poll that started late would answer at once and prove nothing.
	waitFor(t, func() bool { return e.s.Waiting() > 0 })
	e.tick(time.Second)
	select {
	case a := <-done:
		if a.Generations["T"] != 1 || len(a.Queues["T"]) != 4 {
			t.Fatalf("woken poll: %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not wake on the new generation")
	}
	// A wait that ends answers the unchanged assignment.
	start := time.Now()
	if e.do("GET", "/v1/groups/g/assignment?cid=c1&after=1&wait=100ms", "", &a); a.Generations["T"] != 1 || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("timed-out poll: %+v after %v", a, time.Since(start))
	}
	// Shutting down wakes waiting polls.
	go func() {
		var a coordinator.Assignment
		e.do("GET", "/v1/groups/g/assignment?cid=c1&after=1&wait=60s", "", &a)
		done <- a
	}()
	waitFor(t, func() bool { return e.s.Waiting() > 0 })
	e.s.Drain()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not wake the long-poll")
	}
	e.expectError("GET", "/readyz", "", http.StatusServiceUnavailable, "shutting down")
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDiskFull(t *testing.T) {
	e := newEnv(t, func(s store.Store) store.Store { return diskFull{s} })
	e.expectError("PUT", "/v1/topics/T", topicT, http.StatusInsufficientStorage, "no space left on device")
	e.expectError("GET", "/v1/topics/T", "", http.StatusNotFound, "not found")
}

func TestProbesAndMetrics(t *testing.T) {
	e := newEnv(t, nil)
	var ready struct{ Status string }
	if code := e.do("GET", "/readyz", "", &ready); code != http.StatusOK || ready.Status != "ready" {
		t.Fatalf("readyz: %d %+v", code, ready)
	}
	if code := e.do("GET", "/healthz", "", nil); code != http.StatusOK {
		t.Fatalf("healthz: %d", code)
	}
	var pl struct{ Plugins []map[string]string }
	if code := e.do("GET", "/v1/plugins", "", &pl); code != http.StatusOK || len(pl.Plugins) != 2 {
		t.Fatalf("plugins: %d %+v", code, pl)
	}
	e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	e.do("PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c1","topics":["T"]}`, nil)
	e.tick(time.Second)
	resp, err := http.Get(e.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`allocd_group_members{group="g"} 1`,
		`allocd_generation{group="g",topic="T"} 1`,
		`allocd_generations_total{group="g"} 1`,
		`allocd_allocate_calls_total{plugin="averagely"} 1`,
		`allocd_http_requests_total{code="201",route="PUT /v1/topics/{topic}"} 1`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
