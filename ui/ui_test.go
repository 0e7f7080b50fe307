package ui_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/nativestrategy"
	"github.com/allocd/allocd/model"
	"github.com/allocd/allocd/registry"
	"github.com/allocd/allocd/server"
	"github.com/allocd/allocd/store"
	"github.com/allocd/allocd/ui"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// plugins lists the strategies nativestrategy runs, as the registry would.
type plugins struct{}

func (plugins) List() any {
	type view struct {
		registry.Status
		Allocate *model.PluginCalls `json:"allocate,omitempty"`
		Harness  *model.CheckReport `json:"harness,omitempty"`
	}
	return []view{
		{Status: registry.Status{Name: "averagely", Version: "1.0.0", ActiveHash: "44811bb75bb5aaaa", Builtin: true, Stats: host.Stats{Calls: 3, MemoryBytes: 2 << 20},
			History: []registry.Event{{Name: "averagely", Kind: registry.Loaded, Hash: "44811bb75bb5aaaa", Version: "1.0.0"}}},
			Allocate: &model.PluginCalls{Calls: 7, Errors: 1, Mean: 1500 * time.Microsecond, P99: 4 * time.Millisecond},
			Harness: &model.CheckReport{Hash: "44811bb75bb5aaaa", Passed: true, Scenarios: 8, Calls: 40,
				Checks: []model.CheckLine{{Name: "coverage", Status: "pass", Detail: "every queue assigned"}}}},
		{Status: registry.Status{Name: "circle", Version: "1.0.0", ActiveHash: "ff5dec4baf1eaaaa", Builtin: true, LastError: "<b>bad</b> version"}},
	}
}
func (plugins) Get(string) (any, bool) { return nil, false }

type env struct {
	t     testing.TB
	c     *coordinator.Coordinator
	clock *clock
	api   http.Handler
	ts    *httptest.Server
}

// hostile is a client id an attacker could send in a heartbeat.
const hostile = `<script>alert(1)</script>`

func newEnv(t testing.TB, mode ui.Mode) *env {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, clock: &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}}
	e.c, err = coordinator.New(coordinator.Options{Store: st, Allocator: nativestrategy.Allocator{}, Clock: e.clock, SessionTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Coordinator: e.c, Plugins: plugins{}})
	if err != nil {
		t.Fatal(err)
	}
	e.api = srv.Handler()
	view, err := ui.New(ui.Options{API: e.api, Mode: mode, Logger: zerolog.Nop(), Poll: 5 * time.Millisecond, MaxStreams: 2})
	if err != nil {
		t.Fatal(err)
	}
	e.ts = httptest.NewServer(ui.Mount(e.api, view))
	t.Cleanup(e.ts.Close)
	t.Cleanup(view.Close)
	if _, _, err := e.c.PutTopic("T", []coordinator.Broker{{Name: "broker-a", ReadQueues: 4, WriteQueues: 4}, {Name: "broker-b", ReadQueues: 2, WriteQueues: 2}}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"g", "other"} {
		if _, _, err := e.c.PutGroup(g, coordinator.Binding{Strategy: "averagely", Config: map[string]string{"note": `"><img src=x onerror=alert(2)>`}}); err != nil {
			t.Fatal(err)
		}
	}
	e.join("g", "c1", nil)
	e.join("g", hostile, map[string]string{"zone": `"><script>alert(3)</script>`})
	e.tick()
	return e
}

func (e *env) join(group, cid string, labels map[string]string) {
	e.t.Helper()
	if _, err := e.c.Heartbeat(group, coordinator.Heartbeat{CID: cid, Topics: []string{"T"}, Labels: labels}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) tick() {
	e.clock.mu.Lock()
	e.clock.t = e.clock.t.Add(5 * time.Second)
	e.clock.mu.Unlock()
	e.c.Tick(context.Background())
}

func (e *env) get(path string) (int, http.Header, string) {
	e.t.Helper()
	resp, err := http.Get(e.ts.URL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func (e *env) page(path string) string {
	e.t.Helper()
	code, h, body := e.get(path)
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		e.t.Fatalf("GET %s: %d %s: %s", path, code, h.Get("Content-Type"), body)
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "script-src 'self'") {
		e.t.Errorf("GET %s: Content-Security-Policy %q does not keep the page to its own host", path, csp)
	}
	return body
}

// noScript fails when a page carries a script other than its own file, or a hostile value
// unescaped.
func noScript(t *testing.T, path, body string) {
	t.Helper()
	for _, bad := range []string{"<script>alert", `"><img`, "<img", `"><script`} {
		if strings.Contains(body, bad) {
			t.Errorf("%s holds %q unescaped", path, bad)
		}
	}
	if n := strings.Count(body, "<script"); n != 1 || !strings.Contains(body, `<script src="/ui/static/app.js" defer></script>`) {
		t.Errorf("%s has %d script tags, want only app.js", path, n)
	}
	if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Errorf("%s refers to another host", path)
	}
}

var cellRE = regexp.MustCompile(`<button type="button" class="q [^"]*" data-topic="T" data-broker="([^"]+)" data-queue="(\d+)" data-owner="([^"]*)"`)

func TestPagesShowTheAPI(t *testing.T) {
	e := newEnv(t, ui.Read)
	body := e.page("/ui/groups/g")
	noScript(t, "/ui/groups/g", body)
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the hostile client id is not shown escaped")
	}
	status, err := e.c.Group("g")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for cid, qs := range status.Topics["T"].Assignment {
		for _, q := range qs {
			want[q.BrokerName+"/"+itoa(q.QueueID)] = cid
		}
	}
	got := map[string]string{}
	for _, m := range cellRE.FindAllStringSubmatch(body, -1) {
		got[m[1]+"/"+m[2]] = unescape(m[3])
	}
	if len(want) != 6 || len(got) != len(want) {
		t.Fatalf("grid has %d cells %v, the API assigns %d queues %v", len(got), got, len(want), want)
	}
	for q, cid := range want {
		if got[q] != cid {
			t.Errorf("queue %s: the grid says %q, the API %q", q, got[q], cid)
		}
	}
	for _, s := range []string{"first generation", "generation <strong class=\"generation\">1</strong>", `id="preview-form"`, `data-cid="c1"`} {
		if !strings.Contains(body, s) {
			t.Errorf("group page lacks %q", s)
		}
	}
	table := e.page("/ui/groups/g?view=table")
	if n := strings.Count(table, `<tr class="qrow"`); n != 6 {
		t.Errorf("table view has %d queue rows, want 6", n)
	}
	list := e.page("/ui/groups")
	noScript(t, "/ui/groups", list)
	if !strings.Contains(list, `<a href="/ui/groups/g">g</a>`) || !strings.Contains(list, `<td class="num">2</td>`) || !strings.Contains(list, "(g1)") {
		t.Errorf("groups page lacks g with 2 members and generation 1:\n%s", list)
	}
	filtered := e.page("/ui/groups?q=oth")
	if strings.Contains(filtered, `data-name="g"`) || !strings.Contains(filtered, `data-name="other"`) {
		t.Errorf("filter q=oth: want only other")
	}
	plugins := e.page("/ui/plugins")
	noScript(t, "/ui/plugins", plugins)
	if !strings.Contains(plugins, "&lt;b&gt;bad&lt;/b&gt; version") || !strings.Contains(plugins, "2.0 MiB") || !strings.Contains(plugins, `<a href="/ui/groups/g">g</a>`) {
		t.Errorf("plugins page lacks the error, the memory or the groups using it")
	}
	for _, want := range []string{"<td class=\"num\">7</td><td class=\"num\">1</td><td class=\"num\">1.50 ms</td>", "≤ 4.00 ms", "passed</strong> (8 scenarios, 40 calls", "every queue assigned", "No allocation call yet."} {
		if !strings.Contains(plugins, want) {
			t.Errorf("plugins page lacks %q", want)
		}
	}
	topics := e.page("/ui/topics")
	noScript(t, "/ui/topics", topics)
	if !strings.Contains(topics, "broker-a 4/4; broker-b 2/2") {
		t.Errorf("topics page lacks the brokers")
	}
	if code, _, _ := e.get("/ui/static/app.js"); code != http.StatusOK {
		t.Errorf("app.js: %d", code)
	}
}

func TestSortByLag(t *testing.T) {
	e := newEnv(t, ui.Read)
	e.join("other", "o1", nil)
	e.tick()
	report := func(group, cid string, committed int64) {
		a, err := e.c.Heartbeat(group, coordinator.Heartbeat{CID: cid, Topics: []string{"T"}})
		if err != nil {
			t.Fatal(err)
		}
		var offs []coordinator.QueueOffset
		for _, q := range a.Queues["T"] {
			offs = append(offs, coordinator.QueueOffset{BrokerName: q.BrokerName, QueueID: q.QueueID, Committed: committed, Max: 100})
		}
		if _, err := e.c.Heartbeat(group, coordinator.Heartbeat{CID: cid, Topics: []string{"T"}, Offsets: map[string][]coordinator.QueueOffset{"T": offs}}); err != nil {
			t.Fatal(err)
		}
	}
	report("other", "o1", 0) // 6 queues * 100
	report("g", "c1", 90)    // 3 queues * 10
	byName := e.page("/ui/groups")
	byLag := e.page("/ui/groups?sort=lag")
	if strings.Index(byName, `data-name="g"`) > strings.Index(byName, `data-name="other"`) {
		t.Errorf("by name: other before g")
	}
	if strings.Index(byLag, `data-name="other"`) > strings.Index(byLag, `data-name="g"`) || !strings.Contains(byLag, `<td class="num">600</td>`) {
		t.Errorf("by lag: want other (600) first:\n%s", byLag)
	}
	if g := e.page("/ui/groups/g"); !strings.Contains(g, `<small class="lag">10</small>`) {
		t.Errorf("group page lacks a queue's lag of 10")
	}
}

func TestModes(t *testing.T) {
	read := newEnv(t, ui.Read)
	admin := newEnv(t, ui.Admin)
	for _, path := range []string{"/ui/groups/g", "/ui/topics"} {
		r, a := read.page(path), admin.page(path)
		for _, action := range []string{`data-action="delete-`, `id="apply"`, `<dialog id="confirm"`} {
			if strings.Contains(r, action) {
				t.Errorf("read mode %s offers %q", path, action)
			}
		}
		if !strings.Contains(a, `data-action="delete-`) || !strings.Contains(a, `<dialog id="confirm"`) {
			t.Errorf("admin mode %s offers no action", path)
		}
	}
	if !strings.Contains(admin.page("/ui/groups/g"), `id="apply"`) {
		t.Errorf("admin mode offers no bind after the preview")
	}
	for _, bad := range []string{"", "on", "Admin"} {
		if _, err := ui.ParseMode(bad); err == nil {
			t.Errorf("ParseMode(%q) accepted", bad)
		}
	}
	if _, err := ui.New(ui.Options{API: read.api, Mode: ui.Off}); err == nil {
		t.Errorf("New in mode off: no error")
	}
	// The UI changes nothing itself; the API stays where it was.
	req, _ := http.NewRequest(http.MethodPost, read.ts.URL+"/ui/groups/g", strings.NewReader("x"))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/groups/g: %v %v, want 405", resp.StatusCode, err)
	}
	if code, _, body := read.get("/v1/groups/g"); code != http.StatusOK || !strings.Contains(body, `"strategy":"averagely"`) {
		t.Errorf("GET /v1/groups/g through Mount: %d %s", code, body)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err := client.Get(read.ts.URL + "/"); err != nil || resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /: want a redirect to /ui/")
	}
}

func TestErrors(t *testing.T) {
	e := newEnv(t, ui.Read)
	code, _, body := e.get("/ui/groups/%3Cscript%3Ealert(1)%3C%5Cscript%3E")
	if code != http.StatusBadRequest || strings.Contains(body, "<script>alert") || !strings.Contains(body, "group name") {
		t.Errorf("a hostile group name: %d %s", code, body)
	}
	if code, _, body := e.get("/ui/groups/nope"); code != http.StatusNotFound || !strings.Contains(body, `group &#34;nope&#34; not found`) {
		t.Errorf("an unknown group: %d %s", code, body)
	}
	if code, _, _ := e.get("/ui/nothing"); code != http.StatusNotFound {
		t.Errorf("an unknown page: %d", code)
	}
	for _, page := range []string{"https://evil.example/ui/groups", "/v1/groups", "%zz"} {
		if code, _, _ := e.get("/ui/events?page=" + page); code != http.StatusBadRequest {
			t.Errorf("events of page %q: %d, want 400", page, code)
		}
	}
}

// readEvent reads the next "live" event of a stream.
func readEvent(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && b.Len() > 0:
			return b.String()
		case strings.HasPrefix(line, "data: "):
			b.WriteString(line[len("data: "):] + "\n")
		}
	}
}

func TestEventsFollowChanges(t *testing.T) {
	e := newEnv(t, ui.Read)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+"/ui/events?page=/ui/groups/g", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	if first := readEvent(t, r); !strings.Contains(first, `data-cid="c1"`) || strings.Contains(first, `data-cid="c9"`) {
		t.Fatalf("first event: %s", first)
	}
	// At most 2 streams: a third is refused while these two are open.
	req2, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+"/ui/events?page=/ui/groups", nil)
	resp2, err := http.DefaultClient.Do(req2)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	if code, _, _ := e.get("/ui/events?page=/ui/topics"); code != http.StatusServiceUnavailable {
		t.Errorf("a third stream: %d, want 503", code)
	}
	e.join("g", "c9", nil)
	next := readEvent(t, r)
	if !strings.Contains(next, `data-cid="c9"`) {
		t.Fatalf("after c9 joined, the event lacks it: %s", next)
	}
	e.tick()
	// The page reads the status and the history one after the other, so one event may fall
	// between them; a later one shows both.
	for !strings.Contains(next, "generation <strong class=\"generation\">2</strong>") || !strings.Contains(next, "c9 joined") {
		next = readEvent(t, r)
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func unescape(s string) string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&#34;", `"`, "&amp;", "&", "&#39;", "'").Replace(s)
}
