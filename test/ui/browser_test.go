// Package ui_test drives the operators' web view (/ui/) of a real allocd binary with a real
// headless Chromium (Debian's chromium package) through chromedp, and holds what the page
// shows to what the /v1 API answers. It is a module of its own so that chromedp stays out of
// the core module. ALLOCD_BIN names the binary (make test sets it); CHROMIUM, if set, the
// browser (default: chromium on $PATH). The test writes screenshots of every page to docs/.
package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/allocd/allocd/internal/daemontest"
)

// daemon is a running `allocd serve` (internal/daemontest) and its API.
type daemon struct {
	*daemontest.Daemon
	t   *testing.T
	url string
}

// startDaemon runs allocd serve --ui=mode (ALLOCD_BIN) on a free port, waits until it is
// ready, and declares nothing.
func startDaemon(t *testing.T, mode string) *daemon {
	t.Helper()
	d := daemontest.Start(t, t.TempDir(), filepath.Join(os.TempDir(), "allocd-test-cache"),
		"--ui", mode, "--max-delay", "200ms", "--session-timeout", "30s", "--log-level", "warn")
	return &daemon{Daemon: d, t: t, url: d.URL}
}

// do sends a request to the API and decodes its JSON answer into out (when not nil).
func (d *daemon) do(method, path, body string, out any) int {
	d.t.Helper()
	req, err := http.NewRequest(method, d.url+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 && out != nil {
		d.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			d.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

func (d *daemon) must(method, path, body string) {
	d.t.Helper()
	if code := d.do(method, path, body, nil); code >= 300 {
		d.t.Fatalf("%s %s %s: %d", method, path, body, code)
	}
}

func (d *daemon) heartbeat(group, cid string, labels map[string]string) {
	d.t.Helper()
	b, _ := json.Marshal(map[string]any{"cid": cid, "topics": []string{"T"}, "labels": labels})
	d.must("POST", "/v1/groups/"+group+"/heartbeat", string(b))
}

// report sends a member's heartbeat with the offsets of the queues it owns: queue i is behind
// by behind*(i+1) messages.
func (d *daemon) report(group, cid string, labels map[string]string, behind int64) {
	d.t.Helper()
	var a struct {
		Queues map[string][]queue `json:"assignment"`
	}
	b, _ := json.Marshal(map[string]any{"cid": cid, "topics": []string{"T"}, "labels": labels})
	d.do("POST", "/v1/groups/"+group+"/heartbeat", string(b), &a)
	var offs []map[string]any
	for _, q := range a.Queues["T"] {
		offs = append(offs, map[string]any{"brokerName": q.BrokerName, "queueId": q.QueueID, "committed": 1000, "max": 1000 + behind*int64(q.QueueID+1)})
	}
	b, _ = json.Marshal(map[string]any{"cid": cid, "topics": []string{"T"}, "labels": labels, "offsets": map[string]any{"T": offs}})
	d.must("POST", "/v1/groups/"+group+"/heartbeat", string(b))
}

type queue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
}

type groupStatus struct {
	Strategy string `json:"strategy"`
	Members  []struct {
		CID string `json:"cid"`
	} `json:"members"`
	Topics map[string]struct {
		Generation int64              `json:"generation"`
		Assignment map[string][]queue `json:"assignment"`
		State      string             `json:"state"`
	} `json:"topics"`
}

// owners is the API's owner of every queue of topic T of group, and its generation.
func (d *daemon) owners(group string) (map[string]string, int64) {
	d.t.Helper()
	var s groupStatus
	d.do("GET", "/v1/groups/"+group, "", &s)
	out := map[string]string{}
	for cid, qs := range s.Topics["T"].Assignment {
		for _, q := range qs {
			out[fmt.Sprintf("%s/%d", q.BrokerName, q.QueueID)] = cid
		}
	}
	return out, s.Topics["T"].Generation
}

// waitGeneration waits until the group's topic T is at generation n or later and stable.
func (d *daemon) waitGeneration(group string, n int64) {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var s groupStatus
		d.do("GET", "/v1/groups/"+group, "", &s)
		if t := s.Topics["T"]; t.Generation >= n && t.State == "stable" {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("group %s: no stable generation %d within 20s: %+v", group, n, s.Topics["T"])
		}
		time.Sleep(20 * time.Millisecond) // polling the daemon's state, not waiting for a timer
	}
}

const topicT = `{"brokers":[{"name":"broker-a","readQueues":8,"writeQueues":8},{"name":"broker-b","readQueues":4,"writeQueues":4}]}`

// setup declares topic T, group g (averagely) with members c1 and c2, and more groups.
func setup(d *daemon, extra int) {
	d.must("PUT", "/v1/topics/T", topicT)
	d.must("PUT", "/v1/topics/U", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}],"autoscale":{"enabled":true,"min":2,"max":16}}`)
	d.must("PUT", "/v1/groups/g", `{"strategy":"averagely"}`)
	d.must("PUT", "/v1/groups/doomed", `{"strategy":"circle"}`)
	for i := range extra {
		d.must("PUT", fmt.Sprintf("/v1/groups/bulk-%02d", i), `{"strategy":"hash"}`)
	}
	d.heartbeat("g", "c1", map[string]string{"zone": "a"})
	d.heartbeat("g", "c2", map[string]string{"zone": "b", "weight": "2"})
	d.heartbeat("doomed", "d1", nil)
	busy := min(extra, 4) // groups with a member and a lag
	for i := range busy {
		d.heartbeat(fmt.Sprintf("bulk-%02d", i), fmt.Sprintf("worker-%d", i), nil)
	}
	d.waitGeneration("g", 1)
	d.report("g", "c1", map[string]string{"zone": "a"}, 3)
	for i := range busy {
		g := fmt.Sprintf("bulk-%02d", i)
		d.waitGeneration(g, 1)
		d.report(g, fmt.Sprintf("worker-%d", i), nil, int64(10*i+1))
	}
}

// browser starts one headless Chromium for the whole test.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		var err error
		if path, err = exec.LookPath("chromium"); err != nil {
			t.Fatalf("no chromium on $PATH (and CHROMIUM is not set): the browser test needs Debian's chromium package: apt-get update && apt-get install -y chromium (.ci/run installs it)")
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 800), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

func run[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	run(t, ctx, what, chromedp.Steps(steps...))
}

// open navigates to a page and waits until its live stream is connected and has sent the page
// once (so that no update moves what a click aims at right after).
func open(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	do(t, ctx, "open "+url, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body.live[data-updates]")))
}

// waitFor polls a JavaScript predicate in the page and returns how long it took to hold.
func waitFor(t *testing.T, ctx context.Context, what, predicate string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	run(t, ctx, what, chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingTimeout(within), chromedp.WithPollingInterval(10*time.Millisecond)))
	return time.Since(start)
}

// waitNavigated waits until the page the browser shows is path, across the navigation.
func waitNavigated(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		at, err := chromedp.Run(tctx, chromedp.Evaluate[string](`location.pathname + (document.body && document.body.classList.contains("live") ? " live" : "") + (document.getElementById("toast") && !document.getElementById("toast").hidden ? " (says: " + document.getElementById("toast").textContent + ")" : "")`))
		cancel()
		if err == nil && at == path+" live" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the browser shows %q (%v), not %s, after 10s", at, err, path)
		}
		time.Sleep(20 * time.Millisecond) // polling the browser across a navigation
	}
}

// gridCells is what the grid shows: queue to the owner's id of each cell.
const gridCells = `Object.fromEntries([...document.querySelectorAll('button.q[data-topic="T"]')].map(b => [b.dataset.broker + "/" + b.dataset.queue, b.dataset.owner]))`

func checkGrid(t *testing.T, ctx context.Context, d *daemon, when string) {
	t.Helper()
	want, _ := d.owners("g")
	got := run(t, ctx, "read the grid", chromedp.Evaluate[map[string]string](gridCells))
	if len(got) != 12 || len(want) != 12 {
		t.Fatalf("%s: the grid has %d cells, the API assigns %d queues; want 12", when, len(got), len(want))
	}
	for q, cid := range want {
		if got[q] != cid {
			t.Errorf("%s: queue %s: the page says %q, the API %q", when, q, got[q], cid)
		}
	}
	// Readable without colour: each cell's title names its owner.
	titles := run(t, ctx, "read the titles", chromedp.Evaluate[[]string](`[...document.querySelectorAll('button.q[data-topic="T"]')].map(b => b.title)`))
	for _, title := range titles {
		if !strings.Contains(title, "owner c") {
			t.Errorf("%s: a cell's title %q does not name its owner", when, title)
		}
	}
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	run(t, ctx, "scroll to the top", chromedp.Evaluate[int](`window.scrollTo(0, 0); 0`))
	png := run(t, ctx, "screenshot "+name, chromedp.CaptureScreenshot())
	if err := os.WriteFile(filepath.Join("..", "..", "docs", name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// loadTime loads url n times and returns the median time from navigation start to the load
// event, as the browser's Navigation Timing reports it.
func loadTime(t *testing.T, ctx context.Context, url string, n int) time.Duration {
	t.Helper()
	var ms []float64
	for range n {
		do(t, ctx, "load "+url, chromedp.Navigate(url))
		v := run(t, ctx, "timing", chromedp.Poll[float64](`performance.getEntriesByType("navigation")[0].loadEventEnd`, chromedp.WithPollingTimeout(10*time.Second)))
		ms = append(ms, v)
	}
	sort.Float64s(ms)
	return time.Duration(ms[len(ms)/2] * float64(time.Millisecond))
}

func TestBrowser(t *testing.T) {
	if os.Getenv("ALLOCD_BIN") == "" {
		t.Fatal("ALLOCD_BIN is not set: run `make test` (or `make test-ui`), which builds build/allocd and sets it")
	}
	ctx := browser(t)
	admin := startDaemon(t, "admin")
	setup(admin, 0)

	// A group's page: the grid shows the API's owners.
	open(t, ctx, admin.url+"/ui/groups/g")
	checkGrid(t, ctx, admin, "at generation 1")

	// A member joining shows without a reload: the members table at once, then the new
	// generation's owners and its history entry.
	run(t, ctx, "mark the page", chromedp.Evaluate[int](`window.notReloaded = 1`))
	joined := time.Now()
	admin.heartbeat("g", "c3", map[string]string{"zone": "<script>alert(1)</script>"})
	took := waitFor(t, ctx, "c3 in the members table", `document.querySelector('#members tr[data-cid="c3"]') !== null`, 5*time.Second)
	t.Logf("a join showed on the page %v after the heartbeat", time.Since(joined).Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("the join took %v to show, more than a second", took)
	}
	waitFor(t, ctx, "the history lists the join", `[...document.querySelectorAll('.history summary')].some(s => s.textContent.includes("c3 joined"))`, 10*time.Second)
	admin.waitGeneration("g", 2)
	waitFor(t, ctx, "generation 2 on the page", `document.querySelector('.generation').textContent === "2"`, 5*time.Second)
	if v := run(t, ctx, "no reload", chromedp.Evaluate[int](`window.notReloaded || 0`)); v != 1 {
		t.Fatalf("the page reloaded")
	}
	if n := run(t, ctx, "hostile label", chromedp.Evaluate[int](`document.querySelectorAll('#members script').length`)); n != 0 {
		t.Errorf("a label made a script element")
	}
	checkGrid(t, ctx, admin, "after c3 joined")

	// Keyboard: Tab to a cell and press Enter to explain it.
	do(t, ctx, "explain by keyboard", chromedp.Focus(chromedp.CSS(`button.q[data-broker="broker-b"][data-queue="1"]`)), chromedp.KeyEvent(kb.Enter))
	waitFor(t, ctx, "the explanation", `document.querySelector('#explain-body').textContent.includes("broker-b/1 of T: owner c")`, 5*time.Second)

	// Preview: circle's diff drawn on the grid equals the API's.
	var preview struct {
		Topics map[string]struct {
			Moves []struct {
				Queue queue  `json:"queue"`
				To    string `json:"to"`
			} `json:"moves"`
		} `json:"topics"`
	}
	admin.do("POST", "/v1/groups/g/preview", `{"strategy":"circle"}`, &preview)
	var wantMoves []string
	for _, m := range preview.Topics["T"].Moves {
		wantMoves = append(wantMoves, fmt.Sprintf("%s/%d>%s", m.Queue.BrokerName, m.Queue.QueueID, m.To))
	}
	if len(wantMoves) == 0 {
		t.Fatal("the API's preview of circle moves nothing; the test needs a diff")
	}
	do(t, ctx, "preview circle", chromedp.SetValue(chromedp.CSS("#preview-strategy"), "circle"), chromedp.Click(chromedp.CSS("#preview-run")))
	waitFor(t, ctx, "the preview", `document.querySelector('#preview-result').dataset.moves !== undefined`, 10*time.Second)
	gotMoves := run(t, ctx, "moved cells", chromedp.Evaluate[[]string](`[...document.querySelectorAll('button.q.moved')].map(b => b.dataset.broker + "/" + b.dataset.queue + ">" + b.dataset.to)`))
	slices.Sort(wantMoves)
	slices.Sort(gotMoves)
	if !slices.Equal(gotMoves, wantMoves) {
		t.Errorf("the grid draws moves %v, the API's preview has %v", gotMoves, wantMoves)
	}
	screenshot(t, ctx, "ui-group.png")

	// Admin: bind g to circle after the preview, confirmed in a dialog.
	do(t, ctx, "bind", chromedp.Click(chromedp.CSS("#apply")), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	var s groupStatus
	if admin.do("GET", "/v1/groups/g", "", &s); s.Strategy != "averagely" {
		t.Fatalf("the group changed before the confirmation: %s", s.Strategy)
	}
	do(t, ctx, "confirm", chromedp.Click(chromedp.CSS("#confirm-ok")))
	waitFor(t, ctx, "the page shows circle", `document.querySelector('#strategy').textContent === "circle"`, 5*time.Second)
	if admin.do("GET", "/v1/groups/g", "", &s); s.Strategy != "circle" {
		t.Fatalf("after the confirmed bind, the API says strategy %q", s.Strategy)
	}
	admin.waitGeneration("g", 3)
	waitFor(t, ctx, "generation 3 on the page", `document.querySelector('.generation').textContent === "3"`, 5*time.Second)
	checkGrid(t, ctx, admin, "after the bind")

	// Admin: delete a group; cancelling changes nothing, confirming deletes it.
	open(t, ctx, admin.url+"/ui/groups/doomed")
	do(t, ctx, "delete, cancel", chromedp.Click(chromedp.CSS(`button[data-action="delete-group"]`)), chromedp.WaitVisible(chromedp.CSS("#confirm")), chromedp.Click(chromedp.CSS("#confirm-cancel")))
	if code := admin.do("GET", "/v1/groups/doomed", "", nil); code != http.StatusOK {
		t.Fatalf("a cancelled delete deleted the group: %d", code)
	}
	do(t, ctx, "delete, confirm", chromedp.Click(chromedp.CSS(`button[data-action="delete-group"]`)), chromedp.WaitVisible(chromedp.CSS("#confirm")), chromedp.Click(chromedp.CSS("#confirm-ok")))
	waitNavigated(t, ctx, "/ui/groups")
	if code := admin.do("GET", "/v1/groups/doomed", "", nil); code != http.StatusNotFound {
		t.Fatalf("after the confirmed delete, GET /v1/groups/doomed: %d, want 404", code)
	}

	// The other pages, and the screenshots for the README.
	open(t, ctx, admin.url+"/ui/groups")
	waitFor(t, ctx, "the groups list", `!document.querySelector('#groups tr[data-name="doomed"]') && document.querySelector('#groups tr[data-name="g"]') !== null`, 5*time.Second)
	open(t, ctx, admin.url+"/ui/topics")
	waitFor(t, ctx, "the topics", `document.querySelectorAll('#topics tbody tr').length === 2`, 5*time.Second)
	screenshot(t, ctx, "ui-topics.png")
	do(t, ctx, "delete topic U", chromedp.Click(chromedp.CSS(`button[data-action="delete-topic"][data-name="U"]`)), chromedp.WaitVisible(chromedp.CSS("#confirm")), chromedp.Click(chromedp.CSS("#confirm-ok")))
	waitFor(t, ctx, "U gone from the page", `document.querySelector('#topics tr[data-name="U"]') === null && document.querySelector('#topics tr[data-name="T"]') !== null`, 5*time.Second)
	if code := admin.do("GET", "/v1/topics/U", "", nil); code != http.StatusNotFound {
		t.Fatalf("after the confirmed delete, GET /v1/topics/U: %d, want 404", code)
	}
	open(t, ctx, admin.url+"/ui/plugins")
	waitFor(t, ctx, "the plugins", `document.querySelectorAll('section.plugin').length >= 7`, 5*time.Second)
	// The version serving passed the harness's check before it served; g's rebalances called it.
	if got := run(t, ctx, "averagely's harness report", chromedp.Evaluate[string](`(document.querySelector('#plugin-averagely .harness summary strong') || {}).textContent || "none"`)); got != "passed" {
		t.Errorf("averagely's harness report: %q, want passed", got)
	}
	if n := run(t, ctx, "averagely's calls", chromedp.Evaluate[int](`document.querySelectorAll('#plugin-averagely table.stats')[0].querySelector('tbody td').textContent * 1`)); n < 2 {
		t.Errorf("averagely's allocation calls: %d, want at least 2 (generations 1 and 2)", n)
	}
	screenshot(t, ctx, "ui-plugins.png")

	// Read mode: no action offered anywhere; the preview (which changes nothing) still works.
	read := startDaemon(t, "read")
	setup(read, 48) // 50 groups
	for _, page := range []string{"/ui/groups", "/ui/groups/g", "/ui/topics", "/ui/plugins"} {
		open(t, ctx, read.url+page)
		if n := run(t, ctx, "actions", chromedp.Evaluate[int](`document.querySelectorAll('[data-action], #apply, dialog').length`)); n != 0 {
			t.Errorf("read mode %s offers %d actions", page, n)
		}
	}
	open(t, ctx, read.url+"/ui/groups/g")
	do(t, ctx, "preview in read mode", chromedp.SetValue(chromedp.CSS("#preview-strategy"), "circle"), chromedp.Click(chromedp.CSS("#preview-run")))
	waitFor(t, ctx, "a preview in read mode", `document.querySelectorAll('button.q.moved').length > 0`, 10*time.Second)

	// The groups page sorts by lag, filters by name as one types, and the address keeps the filter.
	open(t, ctx, read.url+"/ui/groups?sort=lag")
	order := run(t, ctx, "rows", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#groups tbody tr')].slice(0, 5).map(r => r.dataset.name)`))
	if want := []string{"bulk-03", "bulk-02", "bulk-01", "g", "bulk-00"}; !slices.Equal(order, want) {
		t.Errorf("sorted by lag: %v, want %v", order, want)
	}
	screenshot(t, ctx, "ui-groups.png")
	open(t, ctx, read.url+"/ui/groups")
	do(t, ctx, "filter", chromedp.Focus(chromedp.CSS("#q")), chromedp.KeyEvent("bulk-0"))
	waitFor(t, ctx, "filtered rows", `[...document.querySelectorAll('#groups tbody tr')].filter(r => !r.hidden).length === 10 && location.search.includes("q=bulk-0")`, 5*time.Second)

	// Load time with 50 groups.
	for _, page := range []string{"/ui/groups", "/ui/groups/g"} {
		d := loadTime(t, ctx, read.url+page, 7)
		t.Logf("%s with 50 groups loads in %v (median of 7, navigation start to load event)", page, d.Round(100*time.Microsecond))
		if d > 300*time.Millisecond {
			t.Errorf("%s loads in %v, more than 300 ms", page, d)
		}
	}
}
