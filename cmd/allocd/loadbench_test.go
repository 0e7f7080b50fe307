package main_test

// Load benchmarks of `allocd serve` (issue 4, item 6), driven through the Go client against
// the real binary. They take a minute or more each and are meant to be run alone:
//
//	go test -run '^$' -bench 'ServeHeartbeats' -benchtime 1x -timeout 20m ./cmd/allocd/
//	go test -run '^$' -bench 'ServeJoinPropagation' -benchtime 20x -timeout 20m ./cmd/allocd/
//
// -load.duration sets the measuring window of the heartbeat benchmark (after -args).

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/internal/wasmbuild"
)

var loadDuration = flag.Duration("load.duration", 30*time.Second, "measuring window of BenchmarkServeHeartbeats")

// loadDaemon is `allocd serve` started for a benchmark.
type loadDaemon struct {
	url string
	pid int
	cmd *exec.Cmd
	log *syncBuffer
}

// startLoadDaemon runs allocd serve on a fresh data folder with the built-in plugins, logging
// at info level (the production default) to memory, and waits until it is ready.
func startLoadDaemon(tb testing.TB, extra ...string) *loadDaemon {
	tb.Helper()
	dir := tb.TempDir()
	addrFile := filepath.Join(dir, "addr")
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--addr-file", addrFile,
		"--data-dir", filepath.Join(dir, "data"), "--plugins-dir", wasmbuild.BuiltinPlugins(tb),
		"--cache-dir", filepath.Join(os.TempDir(), "allocd-test-cache"), "--log-format", "json"}, extra...)
	d := &loadDaemon{log: &syncBuffer{}}
	d.cmd = exec.Command(wasmbuild.Allocd(tb), args...)
	d.cmd.Stderr = d.log
	if err := d.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	d.pid = d.cmd.Process.Pid
	exited := make(chan struct{})
	go func() { d.cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			d.cmd.Process.Kill()
			<-exited
		}
		if tb.Failed() {
			tb.Logf("allocd serve log (tail):\n%s", tail(d.log.String(), 4000))
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			d.url = "http://" + strings.TrimSpace(string(b))
			break
		}
		select {
		case <-exited:
			tb.Fatalf("allocd serve exited:\n%s", d.log.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatal("allocd serve wrote no address in time")
		}
	}
	// The daemon listens before its plugins are loaded, and is ready once they are.
	for err := client.New(d.url).Ready(context.Background()); err != nil; err = client.New(d.url).Ready(context.Background()) {
		if time.Now().After(deadline) {
			tb.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return d
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// cpuTime is the user+system CPU time a process has used, from /proc/PID/stat.
func cpuTime(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from after it.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64) // field 14
	stime, _ := strconv.ParseInt(fields[12], 10, 64) // field 15
	const clkTck = 100                               // USER_HZ, 100 on every Linux the daemon targets
	return time.Duration(utime+stime) * time.Second / clkTck
}

// loadavg is the first three fields of /proc/loadavg: the machine may be shared, and a busy
// neighbour shows in the latencies.
func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// rss is a process's resident memory, from /proc/PID/status.
func rss(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// heartbeatHistogram reads the daemon's own latency histograms of the heartbeat route and of
// the heartbeats within batches from /metrics, merged: cumulative counts by upper bound
// (seconds). It measures the handler, without the network, the kernel's queues or the client.
// At a bound one histogram does not have, its count is taken at its next bound below, so a
// quantile read from the merge is never below the true one.
func heartbeatHistogram(tb testing.TB, url string) map[float64]float64 {
	tb.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	alone, batched := map[float64]float64{}, map[float64]float64{}
	for line := range strings.Lines(string(body)) {
		var into map[float64]float64
		switch {
		case strings.HasPrefix(line, "allocd_http_request_seconds_bucket{") && strings.Contains(line, `route="POST /v1/groups/{group}/heartbeat"`):
			into = alone
		case strings.HasPrefix(line, "allocd_http_batched_heartbeat_seconds_bucket{"):
			into = batched
		default:
			continue
		}
		i := strings.Index(line, `le="`)
		j := strings.LastIndexByte(line, ' ')
		if i < 0 || j < 0 {
			continue
		}
		le := line[i+4:]
		le = le[:strings.IndexByte(le, '"')]
		bound, err1 := strconv.ParseFloat(le, 64)
		n, err2 := strconv.ParseFloat(strings.TrimSpace(line[j+1:]), 64)
		if err1 == nil && err2 == nil {
			into[bound] = n
		}
	}
	out := map[float64]float64{}
	for _, h := range []map[float64]float64{alone, batched} {
		for b := range h {
			out[b] = 0
		}
	}
	for b := range out {
		out[b] = countAt(alone, b) + countAt(batched, b)
	}
	return out
}

// countAt is a cumulative histogram's count at its largest bound not above b.
func countAt(h map[float64]float64, b float64) float64 {
	best, n := math.Inf(-1), 0.0
	for bound, c := range h {
		if bound <= b && bound > best {
			best, n = bound, c
		}
	}
	return n
}

// histogramBound returns the smallest bucket bound holding at least q of the requests counted
// between two readings.
func histogramBound(before, after map[float64]float64, q float64) time.Duration {
	bounds := slices.Sorted(maps.Keys(after))
	total := after[math.Inf(1)] - before[math.Inf(1)]
	for _, b := range bounds {
		if after[b]-before[b] >= q*total {
			return time.Duration(b * float64(time.Second))
		}
	}
	return 0
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadClient is a client whose transport keeps an idle connection for every member: thousands
// of consumers share it, each with a long-poll open.
func loadClient(url string) *client.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = 20000
	return client.New(url, client.WithHTTPClient(&http.Client{Transport: t}), client.WithTimeout(30*time.Second))
}

// percentile returns the q-quantile of sorted durations.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// startConsumers starts n consumers, spreading their joins over spread, at most 64 joining at
// once, and returns them once all have joined.
func startConsumers(b *testing.B, n int, spread time.Duration, mk func(i int) *client.Consumer) []*client.Consumer {
	b.Helper()
	cons := make([]*client.Consumer, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		cons[i] = mk(i)
		if d := time.Until(start.Add(spread * time.Duration(i) / time.Duration(n))); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := cons[i].Start(ctx); err != nil {
				errs <- fmt.Errorf("consumer %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return cons
}

// closeConsumers leaves with every consumer, 64 at a time.
func closeConsumers(cons []*client.Consumer) {
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, c := range cons {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c.Close(ctx)
		})
	}
	wg.Wait()
}

// waitSettled waits until every group has a generation for topic and none is pending.
func waitSettled(b *testing.B, c *client.Client, groups []string, topic string, members int) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for _, g := range groups {
		for {
			st, err := c.GetGroup(context.Background(), g)
			if err != nil {
				b.Fatal(err)
			}
			ts := st.Topics[topic]
			if len(st.Members) == members && ts.Generation > 0 && !ts.Pending && len(ts.Assignment) == members {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("group %s did not settle: %d members, topic %+v", g, len(st.Members), ts)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// BenchmarkServeHeartbeats: 5,000 members in 50 groups of 100, each a client.Consumer that
// heartbeats once a second and holds a long-poll open (the client's default), against one
// allocd serve on this machine. It reports the heartbeats' round-trip latency as the client sees
// it (p50, p99, max; ns/op is the mean) and the CPU the daemon used over the measuring window,
// in percent of one core, next to the load generator's own. Run it with -benchtime 1x: one run
// is one measuring window (-load.duration, 30s).
func BenchmarkServeHeartbeats(b *testing.B) {
	for _, longPoll := range []bool{true, false} {
		name := "longpoll"
		if !longPoll {
			name = "heartbeat-only"
		}
		b.Run(name, func(b *testing.B) { benchHeartbeats(b, 50, 100, longPoll, *loadDuration) })
	}
}

func benchHeartbeats(b *testing.B, groups, perGroup int, longPoll bool, window time.Duration, daemonFlags ...string) {
	d := startLoadDaemon(b, daemonFlags...)
	ctx := context.Background()
	c := loadClient(d.url)
	if _, err := c.PutTopic(ctx, "T", []client.Broker{
		{Name: "broker-a", ReadQueues: 16, WriteQueues: 16}, {Name: "broker-b", ReadQueues: 16, WriteQueues: 16},
		{Name: "broker-c", ReadQueues: 16, WriteQueues: 16}, {Name: "broker-d", ReadQueues: 16, WriteQueues: 16},
	}); err != nil {
		b.Fatal(err)
	}
	var names []string
	for g := range groups {
		names = append(names, fmt.Sprintf("g%02d", g))
		if _, err := c.PutGroup(ctx, names[g], client.Binding{Strategy: "averagely"}); err != nil {
			b.Fatal(err)
		}
	}

	var (
		measuring atomic.Bool
		mu        sync.Mutex
		lat       = make([]time.Duration, 0, 64<<10)
		failed    atomic.Int64
	)
	onHeartbeat := func(took time.Duration, err error) {
		if !measuring.Load() {
			return
		}
		if err != nil {
			failed.Add(1)
			return
		}
		mu.Lock()
		lat = append(lat, took)
		mu.Unlock()
	}
	n := groups * perGroup
	joinStart := time.Now()
	cons := startConsumers(b, n, 2*time.Second, func(i int) *client.Consumer {
		return c.NewConsumer(names[i%groups], fmt.Sprintf("10.%d.%d.%d@%d", i/65536, i/256%256, i%256, 1000+i), []string{"T"},
			client.ConsumerOptions{HeartbeatInterval: time.Second, DisableLongPoll: !longPoll, OnHeartbeat: onHeartbeat})
	})
	defer closeConsumers(cons)
	waitSettled(b, c, names, "T", perGroup)
	b.Logf("%d members joined and every group settled in %v", n, time.Since(joinStart).Round(time.Millisecond))
	time.Sleep(3 * time.Second) // let the heartbeats fall into their steady rhythm

	b.ResetTimer()
	load0 := loadavg()
	hist0 := heartbeatHistogram(b, d.url)
	cpu0, self0, t0 := cpuTime(b, d.pid), selfCPU(), time.Now()
	measuring.Store(true)
	time.Sleep(window)
	measuring.Store(false)
	cpu1, self1, elapsed := cpuTime(b, d.pid), selfCPU(), time.Since(t0)
	b.StopTimer()
	hist1 := heartbeatHistogram(b, d.url)

	mu.Lock()
	slices.Sort(lat)
	samples := slices.Clone(lat)
	mu.Unlock()
	if len(samples) == 0 {
		b.Fatal("no heartbeat in the window")
	}
	var sum time.Duration
	for _, l := range samples {
		sum += l
	}
	rate := float64(len(samples)) / elapsed.Seconds()
	if failed.Load() > 0 || rate < 0.9*float64(n) {
		b.Errorf("%d heartbeats failed; %.0f heartbeats/s for %d members", failed.Load(), rate, n)
	}
	// Members all still there: none missed its session under load.
	for _, g := range names {
		if st, err := c.GetGroup(ctx, g); err != nil || len(st.Members) != perGroup {
			b.Errorf("group %s has %d members after the run, want %d (%v)", g, len(st.Members), perGroup, err)
		}
	}
	b.ReportMetric(float64(sum)/float64(len(samples)), "ns/op")
	b.ReportMetric(ms(percentile(samples, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(samples, 0.90)), "p90-ms")
	b.ReportMetric(ms(percentile(samples, 0.99)), "p99-ms")
	b.ReportMetric(ms(percentile(samples, 0.999)), "p99.9-ms")
	b.ReportMetric(ms(samples[len(samples)-1]), "max-ms")
	b.ReportMetric(rate, "heartbeats/s")
	b.ReportMetric(100*float64(cpu1-cpu0)/float64(elapsed), "daemon-cpu-%")
	b.ReportMetric(100*float64(self1-self0)/float64(elapsed), "loadgen-cpu-%")
	b.ReportMetric(float64(failed.Load()), "errors")
	// The daemon's own view: the bucket bound (100us x 4^k) under which 50% and 99% of the
	// window's heartbeats were handled.
	b.ReportMetric(ms(histogramBound(hist0, hist1, 0.50)), "daemon-p50<=ms")
	b.ReportMetric(ms(histogramBound(hist0, hist1, 0.99)), "daemon-p99<=ms")
	b.ReportMetric(float64(rss(d.pid))/(1<<20), "daemon-rss-MiB")
	b.Logf("window %v: %d heartbeats, daemon CPU %v, load generator CPU %v; load average before %s, after %s",
		elapsed.Round(time.Millisecond), len(samples), (cpu1 - cpu0).Round(time.Millisecond), (self1 - self0).Round(time.Millisecond),
		load0, loadavg())
}

// BenchmarkServeJoinPropagation: a group of 1,000 consumers, each holding a long-poll open
// (heartbeats every 10s, the client's default); one op is one new member joining, timed from
// just before its join heartbeat until every one of the 1,000 has received the new generation
// on its Assignments channel. ns/op is the mean; the metrics give the median and worst of the
// time until the first and the last of them had it. The daemon coalesces joins for --debounce
// (200ms by default) before it computes; the second run shows the cost without that wait.
// Run it with -benchtime 20x.
func BenchmarkServeJoinPropagation(b *testing.B) {
	for _, debounce := range []time.Duration{200 * time.Millisecond, 10 * time.Millisecond} {
		b.Run("debounce="+debounce.String(), func(b *testing.B) { benchJoin(b, 1000, debounce) })
	}
}

func benchJoin(b *testing.B, members int, debounce time.Duration) {
	d := startLoadDaemon(b, "--debounce", debounce.String())
	ctx := context.Background()
	c := loadClient(d.url)
	var brokers []client.Broker
	for _, name := range []string{"broker-a", "broker-b", "broker-c", "broker-d"} {
		brokers = append(brokers, client.Broker{Name: name, ReadQueues: 256, WriteQueues: 256})
	}
	if _, err := c.PutTopic(ctx, "T", brokers); err != nil {
		b.Fatal(err)
	}
	if _, err := c.PutGroup(ctx, "g", client.Binding{Strategy: "averagely"}); err != nil {
		b.Fatal(err)
	}

	// arrived[i] is the time consumer i last received a generation, gens[i] which.
	var (
		mu      sync.Mutex
		gens    = make([]int64, members)
		arrived = make([]time.Time, members)
		changed = make(chan struct{}, 1)
	)
	cons := startConsumers(b, members, time.Second, func(i int) *client.Consumer {
		return c.NewConsumer("g", fmt.Sprintf("10.1.%d.%d@%d", i/256, i%256, 2000+i), []string{"T"}, client.ConsumerOptions{})
	})
	var readers sync.WaitGroup
	for i, cn := range cons {
		readers.Go(func() {
			for a := range cn.Assignments() {
				now := time.Now()
				mu.Lock()
				gens[i], arrived[i] = a.Generation, now
				mu.Unlock()
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		})
	}
	defer readers.Wait()
	defer closeConsumers(cons)
	waitSettled(b, c, []string{"g"}, "T", members)
	st, _ := c.GetGroup(ctx, "g")
	base := st.Topics["T"].Generation
	// every waits until all members have a generation above gen, and returns the first and
	// last arrival.
	every := func(gen int64) (first, last time.Time) {
		deadline := time.After(time.Minute)
		for {
			mu.Lock()
			done := 0
			first, last = time.Time{}, time.Time{}
			for i := range gens {
				if gens[i] > gen {
					done++
					if first.IsZero() || arrived[i].Before(first) {
						first = arrived[i]
					}
					if arrived[i].After(last) {
						last = arrived[i]
					}
				}
			}
			mu.Unlock()
			if done == members {
				return first, last
			}
			select {
			case <-changed:
			case <-time.After(10 * time.Millisecond):
			case <-deadline:
				b.Fatalf("after a minute %d of %d members have a generation above %d", done, members, gen)
			}
		}
	}
	every(base - 1)
	b.Logf("%d members at generation %d", members, base)

	var firsts, lasts, fanouts []time.Duration
	var joiners []*client.Consumer
	defer func() { closeConsumers(joiners) }()
	for b.Loop() {
		j := c.NewConsumer("g", fmt.Sprintf("10.2.0.%d@1", len(joiners)), []string{"T"}, client.ConsumerOptions{})
		joiners = append(joiners, j)
		t0 := time.Now()
		if err := j.Start(ctx); err != nil {
			b.Fatal(err)
		}
		first, last := every(base)
		firsts, lasts = append(firsts, first.Sub(t0)), append(lasts, last.Sub(t0))
		fanouts = append(fanouts, last.Sub(first))
		mu.Lock()
		base = slices.Max(gens)
		mu.Unlock()
		if base != slices.Min(gens) {
			b.Fatalf("members disagree on the generation: %d..%d", slices.Min(gens), base)
		}
	}
	b.StopTimer()
	slices.Sort(firsts)
	slices.Sort(lasts)
	slices.Sort(fanouts)
	b.ReportMetric(ms(percentile(firsts, 0.5)), "first-p50-ms")
	b.ReportMetric(ms(percentile(lasts, 0.5)), "all-p50-ms")
	b.ReportMetric(ms(lasts[len(lasts)-1]), "all-max-ms")
	b.ReportMetric(ms(percentile(fanouts, 0.5)), "fanout-p50-ms")
	b.Logf("%d joins: until the first member had the new generation %v, until all %d had it %v (p50); load average %s",
		len(lasts), percentile(firsts, 0.5).Round(time.Millisecond), members, percentile(lasts, 0.5).Round(time.Millisecond), loadavg())
}
