package main_test

// The fleet benchmark (issue 17, item 4): 20,000 members in 200 groups heartbeating once a
// second against one `allocd serve`, first without long-polls, then each holding one. The load
// generator runs as several processes (this test binary, re-run as a child), so that its own
// garbage collector and file descriptors are spread. It takes a few minutes; run it alone:
//
//	go test -run '^$' -bench Fleet -benchtime 1x -timeout 30m ./cmd/allocd/ -args -fleet.members=20000
//
// This machine allows 20,000 open files per process: a daemon cannot hold 20,000 HTTP/1.1
// connections, so the default protocol is HTTP/2 without TLS (h2c, which the daemon serves
// beside HTTP/1.1), each child multiplexing its members' requests over a few connections;
// -fleet.proto=http1 gives every member a connection of its own (at most ~18,000 in all).
// -fleet.batch=false sends every heartbeat as a request of its own, as members that each run in a
// process of their own do; by default a load process's members share requests (client batching).
// -fleet.pollbatch=false holds every long-poll as a request of its own; by default a load
// process's long-polls share requests of up to 64 (client.WithPollBatching).
//
// The load processes run at nice 19 (-fleet.nice): on a machine of two cores they would
// otherwise take the daemon's CPU in time slices of several milliseconds, and the daemon's
// heartbeat p99 measured their scheduling rather than the daemon (BENCHMARKS.md, "The load
// generator at nice 19").

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allocd/allocd/client"
)

var (
	fleetMembers = flag.Int("fleet.members", 20000, "members of BenchmarkFleet")
	fleetGroups  = flag.Int("fleet.groups", 200, "groups of BenchmarkFleet")
	fleetProcs   = flag.Int("fleet.procs", 4, "load-generator processes of BenchmarkFleet")
	fleetProto   = flag.String("fleet.proto", "h2c", "protocol of BenchmarkFleet's members: h2c or http1")
	fleetBatch   = flag.Bool("fleet.batch", true, "let a load process's members share heartbeat requests (client.WithHeartbeatBatching); false: one request per heartbeat, as members in processes of their own send them")
	fleetPolls   = flag.Bool("fleet.pollbatch", true, "let a load process's members share long-poll requests (client.WithPollBatching); false: one held request per long-poll")
	fleetNice    = flag.Int("fleet.nice", 19, "run the load processes at this niceness (nice -n): they share the daemon's cores, and at 0 the daemon's heartbeat tail is their time slices")
	fleetWindow  = flag.Duration("fleet.window", 20*time.Second, "each measuring window of BenchmarkFleet")
	fleetProfile = flag.String("fleet.profile", "", "write the daemon's CPU profiles of BenchmarkFleet's windows to FILE.hb and FILE.poll (go tool pprof)")
)

// fleetChildEnv, when set, makes the test binary a load-generator child (TestMain): its value
// is "URL GROUP-FIRST GROUPS PER-GROUP PROTO BATCH POLLBATCH".
const fleetChildEnv = "ALLOCD_FLEET_CHILD"

var inf = math.Inf(1)

// BenchmarkFleet reports, for each of its two windows (heartbeats only, then with every
// member's long-poll held): the daemon's CPU in percent of one core (utime+stime of the real
// process), the bound of its own heartbeat-latency histogram under which 99% fell, the
// heartbeat rate, and the daemon's RSS; rss-KiB/poll is the RSS the held long-polls added,
// per poll.
func BenchmarkFleet(b *testing.B) {
	members, groups, procs := *fleetMembers, *fleetGroups, *fleetProcs
	if members%groups != 0 || groups%procs != 0 {
		b.Fatalf("-fleet.members %d must divide into -fleet.groups %d, and those into -fleet.procs %d", members, groups, procs)
	}
	perGroup := members / groups
	var d *loadDaemon
	if *fleetProfile != "" {
		d = startLoadDaemon(b, "--debug-listen", "127.0.0.1:0")
	} else {
		d = startLoadDaemon(b)
	}
	ctx := context.Background()
	c := client.New(d.url)
	if _, err := c.PutTopic(ctx, "T", []client.Broker{
		{Name: "broker-a", ReadQueues: 16, WriteQueues: 16}, {Name: "broker-b", ReadQueues: 16, WriteQueues: 16},
		{Name: "broker-c", ReadQueues: 16, WriteQueues: 16}, {Name: "broker-d", ReadQueues: 16, WriteQueues: 16},
	}); err != nil {
		b.Fatal(err)
	}
	names := make([]string, groups)
	for g := range names {
		names[g] = fmt.Sprintf("g%03d", g)
		if _, err := c.PutGroup(ctx, names[g], client.Binding{Strategy: "averagely"}); err != nil {
			b.Fatal(err)
		}
	}
	base := rss(d.pid)

	children := make([]*fleetChild, procs)
	for i := range children {
		children[i] = startFleetChild(b, fmt.Sprintf("%s %d %d %d %s %t %t", d.url, i*groups/procs, groups/procs, perGroup, *fleetProto, *fleetBatch, *fleetPolls))
	}
	defer func() {
		for _, ch := range children {
			ch.stop(b)
		}
	}()
	for _, ch := range children {
		ch.expect(b, "joined")
	}
	waitSettled(b, c, names, "T", perGroup)
	time.Sleep(3 * time.Second) // heartbeats in their rhythm

	measure := func(phase string) int64 {
		load0 := loadavg()
		hist0 := heartbeatHistogram(b, d.url)
		cpu0, t0 := cpuTime(b, d.pid), time.Now()
		profiled := make(chan error, 1)
		if *fleetProfile != "" {
			go func() { profiled <- profileDaemon(d, *fleetWindow, *fleetProfile+"."+phase) }()
		} else {
			profiled <- nil
		}
		time.Sleep(*fleetWindow)
		cpu1, elapsed := cpuTime(b, d.pid), time.Since(t0)
		if err := <-profiled; err != nil {
			b.Errorf("%s: profile: %v", phase, err)
		}
		hist1 := heartbeatHistogram(b, d.url)
		total := hist1[inf] - hist0[inf]
		mem := rss(d.pid)
		b.ReportMetric(100*float64(cpu1-cpu0)/float64(elapsed), phase+"-daemon-cpu-%")
		b.ReportMetric(ms(histogramBound(hist0, hist1, 0.99)), phase+"-daemon-p99<=ms")
		b.ReportMetric(ms(histogramBound(hist0, hist1, 0.50)), phase+"-daemon-p50<=ms")
		b.ReportMetric(total/elapsed.Seconds(), phase+"-heartbeats/s")
		b.ReportMetric(float64(mem)/(1<<20), phase+"-rss-MiB")
		b.Logf("%s: %v window, %.0f heartbeats/s, daemon CPU %v, RSS %d MiB; load average before %s, after %s",
			phase, elapsed.Round(time.Millisecond), total/elapsed.Seconds(), (cpu1 - cpu0).Round(time.Millisecond), mem>>20, load0, loadavg())
		if rate := total / elapsed.Seconds(); rate < 0.9*float64(members) {
			// The load generator could not keep up (a shared machine): the figures are for
			// the rate reported, not for one heartbeat per member per second.
			b.Logf("%s: WARNING: only %.0f heartbeats/s for %d members", phase, rate, members)
		}
		return mem
	}

	b.ResetTimer()
	hbOnly := measure("hb")
	for _, ch := range children {
		ch.send(b, "poll")
	}
	for _, ch := range children {
		ch.expect(b, "polling")
	}
	time.Sleep(3 * time.Second) // every poll arrived and waits
	withPolls := measure("poll")
	b.StopTimer()
	b.ReportMetric(float64(withPolls-hbOnly)/1024/float64(members), "rss-KiB/poll")
	b.ReportMetric(float64(base)/(1<<20), "base-rss-MiB")

	// Members all still there: none missed its session under load.
	for _, g := range names {
		if st, err := c.GetGroup(ctx, g); err != nil || len(st.Members) != perGroup {
			b.Errorf("group %s has %d members after the run, want %d (%v)", g, len(st.Members), perGroup, err)
		}
	}
	var errs int
	for _, ch := range children {
		errs += ch.stop(b)
	}
	b.ReportMetric(float64(errs), "errors")
	if errs > 0 {
		b.Errorf("%d failed heartbeats or polls in the load generator", errs)
	}
}

// fleetChild is one load-generator process.
type fleetChild struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string
	stopped bool
	errs    int
}

func startFleetChild(b *testing.B, spec string) *fleetChild {
	b.Helper()
	ch := &fleetChild{lines: make(chan string, 16)}
	ch.cmd = exec.Command(os.Args[0], "-test.run=^$")
	if *fleetNice != 0 {
		ch.cmd = exec.Command("nice", "-n", strconv.Itoa(*fleetNice), os.Args[0], "-test.run=^$")
	}
	ch.cmd.Env = append(os.Environ(), fleetChildEnv+"="+spec)
	ch.cmd.Stderr = os.Stderr
	var err error
	if ch.stdin, err = ch.cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	out, err := ch.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := ch.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			ch.lines <- sc.Text()
		}
		close(ch.lines)
	}()
	return ch
}

func (ch *fleetChild) send(b *testing.B, line string) {
	if _, err := fmt.Fprintln(ch.stdin, line); err != nil {
		b.Fatal(err)
	}
}

// expect waits for the child to print want.
func (ch *fleetChild) expect(b *testing.B, want string) {
	b.Helper()
	timeout := time.After(5 * time.Minute)
	for {
		select {
		case line, ok := <-ch.lines:
			if !ok {
				b.Fatalf("load generator exited before %q", want)
			}
			if line == want {
				return
			}
		case <-timeout:
			b.Fatalf("load generator did not say %q in time", want)
		}
	}
}

// stop makes the child's members leave and returns its count of failed requests.
func (ch *fleetChild) stop(b *testing.B) int {
	if ch.stopped {
		return ch.errs
	}
	ch.stopped = true
	ch.stdin.Close()
	for line := range ch.lines {
		if n, ok := strings.CutPrefix(line, "errors "); ok {
			ch.errs, _ = strconv.Atoi(n)
		}
	}
	ch.cmd.Wait()
	return ch.errs
}

// runFleetChild is a child's main: it joins its members, heartbeats each once a second
// (reporting the generation it was told as applied, as client.Consumer does), starts their
// long-polls on "poll", and leaves with all of them when its standard input closes.
func runFleetChild(spec string) int {
	var url, proto string
	var first, groups, perGroup int
	var batch, pollBatch bool
	if _, err := fmt.Sscan(spec, &url, &first, &groups, &perGroup, &proto, &batch, &pollBatch); err != nil {
		fmt.Fprintln(os.Stderr, "fleet child:", err)
		return 2
	}
	// Heartbeats share a bounded pool of connections (a member's heartbeat takes a
	// millisecond of a second); each long-poll has a connection of its own.
	hbT := http.DefaultTransport.(*http.Transport).Clone()
	hbT.MaxIdleConns, hbT.MaxIdleConnsPerHost, hbT.MaxConnsPerHost = 0, 128, 128
	pollT := http.DefaultTransport.(*http.Transport).Clone()
	pollT.MaxIdleConns, pollT.MaxIdleConnsPerHost = 0, groups*perGroup+100
	if proto == "h2c" {
		for _, t := range []*http.Transport{hbT, pollT} {
			t.Protocols = new(http.Protocols)
			t.Protocols.SetUnencryptedHTTP2(true)
		}
	}
	c := client.New(url, client.WithHTTPClient(&http.Client{Transport: hbT}), client.WithTimeout(30*time.Second),
		client.WithHeartbeatBatching(batch))
	pc := client.New(url, client.WithHTTPClient(&http.Client{Transport: pollT}), client.WithTimeout(30*time.Second),
		client.WithPollBatching(pollBatch))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type fleetMember struct {
		group, cid string
		gen        atomic.Int64
	}
	var ms []*fleetMember
	for g := first; g < first+groups; g++ {
		for i := range perGroup {
			ms = append(ms, &fleetMember{group: fmt.Sprintf("g%03d", g), cid: fmt.Sprintf("10.%d.%d.%d@%d", g/256, g%256, i%256, 1000+i)})
		}
	}
	var errs atomic.Int64
	beat := func(m *fleetMember) {
		hb := client.Heartbeat{CID: m.cid, Topics: []string{"T"}, Confirms: true}
		if n := m.gen.Load(); n > 0 {
			hb.Generations = map[string]int64{"T": n}
		}
		a, err := c.Heartbeat(ctx, m.group, hb)
		if err != nil {
			if ctx.Err() == nil {
				errs.Add(1)
			}
			return
		}
		m.gen.Store(a.Generations["T"])
	}
	// Join, 64 at a time, then heartbeat each second from a random phase.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, m := range ms {
		sem <- struct{}{}
		wg.Go(func() { defer func() { <-sem }(); beat(m) })
	}
	wg.Wait()
	var loops sync.WaitGroup
	for _, m := range ms {
		loops.Go(func() {
			timer := time.NewTimer(rand.N(time.Second))
			defer timer.Stop()
			next := time.Now()
			for {
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
				next = next.Add(time.Second)
				beat(m)
				timer.Reset(time.Until(next))
			}
		})
	}
	fmt.Println("joined")

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "poll" {
			continue
		}
		for _, m := range ms {
			loops.Go(func() {
				for ctx.Err() == nil {
					a, err := pc.PollAssignment(ctx, m.group, m.cid, "", m.gen.Load(), client.DefaultPollWait)
					if err != nil {
						if ctx.Err() == nil {
							errs.Add(1)
							time.Sleep(time.Second)
						}
						continue
					}
					m.gen.Store(a.Generations["T"])
				}
			})
		}
		fmt.Println("polling")
	}
	cancel()
	loops.Wait()
	for _, m := range ms {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer lcancel()
			c.Leave(lctx, m.group, m.cid)
		})
	}
	wg.Wait()
	fmt.Println("errors", errs.Load())
	return 0
}

// profileDaemon writes the daemon's CPU profile over the next window to file, from its
// --debug-listen address (in its log).
func profileDaemon(d *loadDaemon, window time.Duration, file string) error {
	m := regexp.MustCompile(`"debugAddr":"([^"]+)"`).FindStringSubmatch(d.log.String())
	if m == nil {
		return fmt.Errorf("no debug address in the daemon's log")
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", m[1], int(window.Seconds())))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: %s", resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
