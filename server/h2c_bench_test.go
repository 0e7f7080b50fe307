package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/internal/nativestrategy"
	"github.com/allocd/allocd/server"
	"github.com/allocd/allocd/store"
)

// The h2c benchmarks measure the server's side of the fleet's protocol in a process of its
// own: the server runs in the test process on a real http.Server set up as the daemon sets up
// its own (server.ConfigureHTTP), and the Go client sends from a child process (this test
// binary again, h2cChildEnv), so that the process's CPU, heap and instruction counts are the
// server's alone. Instructions per heartbeat, load-independent (N and 3N ops, the client in
// a process callgrind does not count):
//
//	go test -c -o /tmp/server.test ./server/ && sh server/testdata/h2c-callgrind.sh /tmp/server.test HeartbeatH2C/senders=8 2000 6000
const h2cChildEnv = "ALLOCD_SERVER_H2C_CHILD"

// h2cMembers is the group of the h2c benchmarks: the fleet benchmark's shape (groups of
// 100 over topic T, 4 brokers x 16 queues, averagely).
const h2cMembers = 100

func h2cCID(i int) string { return fmt.Sprintf("10.0.%d.%d@%d", i/256, i%256, 1000+i) }

// h2cServer is a server with one group of members, each having joined and applied its
// generation, served over HTTP/1.1 and h2c on a loopback port.
type h2cServer struct {
	c     *coordinator.Coordinator
	s     *server.Server
	clock *fakeClock
	url   string
}

// newBenchServer is a server over a coordinator on a store without fsync, with the native
// strategies, a clock the benchmark moves and sessions that do not time out.
func newBenchServer(b *testing.B) (*server.Server, *coordinator.Coordinator, *fakeClock) {
	b.Helper()
	st, err := store.Open(b.TempDir(), store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	clock := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	c, err := coordinator.New(coordinator.Options{Store: st, Allocator: nativestrategy.Allocator{}, Clock: clock, Metrics: reg, SessionTimeout: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	s, err := server.New(server.Options{Coordinator: c, Metrics: reg})
	if err != nil {
		b.Fatal(err)
	}
	return s, c, clock
}

func newH2CServer(b *testing.B, members int) *h2cServer {
	b.Helper()
	s, c, clock := newBenchServer(b)
	var brokers []coordinator.Broker
	for _, name := range []string{"broker-a", "broker-b", "broker-c", "broker-d"} {
		brokers = append(brokers, coordinator.Broker{Name: name, ReadQueues: 16, WriteQueues: 16})
	}
	if _, _, err := c.PutTopic("T", brokers); err != nil {
		b.Fatal(err)
	}
	if _, _, err := c.PutGroup("g", coordinator.Binding{Strategy: "averagely"}); err != nil {
		b.Fatal(err)
	}
	for i := range members {
		if _, err := c.Heartbeat("g", coordinator.Heartbeat{CID: h2cCID(i), Topics: []string{"T"}}); err != nil {
			b.Fatal(err)
		}
	}
	clock.Advance(time.Second)
	c.Tick(context.Background())
	srv := &http.Server{Handler: s.Handler()}
	server.ConfigureHTTP(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return &h2cServer{c: c, s: s, clock: clock, url: "http://" + ln.Addr().String()}
}

// runH2CChild runs this test binary as a client process with spec and waits for it to print
// "done", returning what else it printed. With H2C_EXTERNAL=DIR the client is left to another
// process (callgrind counts a process whose children signal it wrongly): the spec is written
// to DIR/spec, and the client's output is read from DIR/out once it appears (h2c-callgrind.sh).
func runH2CChild(b *testing.B, spec string, started func()) []string {
	b.Helper()
	if dir := os.Getenv("H2C_EXTERNAL"); dir != "" {
		return runH2CExternal(b, dir, spec, started)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), h2cChildEnv+"="+spec, "GOGC=100")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if started != nil {
		started()
	}
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("h2c client %q: %v (%q)", spec, err, lines)
	}
	return h2cDone(b, spec, lines)
}

func h2cDone(b *testing.B, spec string, lines []string) []string {
	if len(lines) == 0 || lines[len(lines)-1] != "done" {
		b.Fatalf("h2c client %q: %q", spec, lines)
	}
	return lines[:len(lines)-1]
}

func runH2CExternal(b *testing.B, dir, spec string, started func()) []string {
	out := filepath.Join(dir, "out")
	os.Remove(out)
	if err := os.WriteFile(filepath.Join(dir, "spec.tmp"), []byte(spec), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "spec.tmp"), filepath.Join(dir, "spec")); err != nil {
		b.Fatal(err)
	}
	if started != nil {
		started()
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		if text, err := os.ReadFile(out); err == nil {
			os.Remove(out)
			return h2cDone(b, spec, strings.Split(strings.TrimSpace(string(text)), "\n"))
		}
		if time.Now().After(deadline) {
			b.Fatalf("no answer in %s from the external h2c client", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cpuNow is this process's user and system CPU time.
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHeartbeatH2C is steady heartbeats (nothing changes, each member reporting the
// generation it applied, as client.Consumer does) from 100 members over h2c through one
// client.Client, 8 or 64 sent at a time (a fleet's load generator has dozens in flight).
// server-cpu-us/op is the server process's CPU per heartbeat (its garbage collector's
// included; it varies with the machine's load, unlike the instruction counts of callgrind).
func BenchmarkHeartbeatH2C(b *testing.B) {
	for _, senders := range []int{8, 64} {
		b.Run(fmt.Sprintf("senders=%d", senders), func(b *testing.B) {
			h := newH2CServer(b, h2cMembers)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuNow(b)
			lines := runH2CChild(b, fmt.Sprintf("hb %s %d %d", h.url, b.N, senders), nil)
			b.StopTimer()
			b.ReportMetric(float64((cpuNow(b)-cpu0).Microseconds())/float64(b.N), "server-cpu-us/op")
			var clientCPU time.Duration
			if len(lines) != 1 || func() error { _, err := fmt.Sscanf(lines[0], "cpu %d", &clientCPU); return err }() != nil {
				b.Fatalf("h2c client: %q", lines)
			}
			b.ReportMetric(float64(clientCPU.Microseconds())/float64(b.N), "client-cpu-us/op")
		})
	}
}

// BenchmarkH2CFloor is BenchmarkHeartbeatH2C's traffic answered by a handler that reads the
// body and writes a steady member's answer as bytes, without the server's routes: what the
// HTTP/2 server itself costs per heartbeat, on the same http.Server setup.
func BenchmarkH2CFloor(b *testing.B) {
	answer := []byte(`{"generations":{"T":2},"assignment":{"T":[]}}` + "\n")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	})}
	server.ConfigureHTTP(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuNow(b)
	runH2CChild(b, fmt.Sprintf("hb %s %d %d", "http://"+ln.Addr().String(), b.N, 8), nil)
	b.StopTimer()
	b.ReportMetric(float64((cpuNow(b)-cpu0).Microseconds())/float64(b.N), "server-cpu-us/op")
}

// BenchmarkHeldPollsH2C is BenchmarkHeldPolls over h2c: 2,000 members each hold a long-poll,
// multiplexed by the Go client over as few connections as the server's stream limit allows,
// and the server's heap and goroutine stacks in use grow by bytes/poll (stack-bytes/poll of
// them stacks). alone: each poll is a request (a stream) of its own; batched: the client's
// polls share requests (POST /v1/assignments), as it sends them by default.
func BenchmarkHeldPollsH2C(b *testing.B) {
	for _, batched := range []bool{false, true} {
		b.Run(map[bool]string{false: "alone", true: "batched"}[batched], func(b *testing.B) { heldPollsH2C(b, batched) })
	}
}

func heldPollsH2C(b *testing.B, batched bool) {
	const n = 2000
	h := newH2CServer(b, n)
	var perPoll, stackPerPoll float64
	for range b.N {
		if _, err := h.c.Heartbeat("g", coordinator.Heartbeat{CID: "extra", Topics: []string{"T"}}); err != nil {
			b.Fatal(err)
		}
		h.clock.Advance(time.Second)
		h.c.Tick(context.Background())
		a, _, err := h.c.Poll("g", h2cCID(0), nil)
		if err != nil {
			b.Fatal(err)
		}
		after := a.Generations["T"]
		before, beforeStack := inUse(), stackInUse()
		lines := runH2CChild(b, fmt.Sprintf("poll %s %d %d %t", h.url, n, after, batched), func() {
			deadline := time.Now().Add(time.Minute)
			for h.s.Waiting() < n {
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d polls waiting after a minute", h.s.Waiting(), n)
				}
				time.Sleep(time.Millisecond)
			}
			perPoll = float64(inUse()-before) / n
			stackPerPoll = float64(stackInUse()-beforeStack) / n
			if f := os.Getenv("HELDPOLLS_HEAP"); f != "" { // a heap profile with the polls held
				writeHeapProfile(b, f)
			}
			// A member leaves: every poll answers with the new generation.
			h.c.Leave("g", "extra")
			h.clock.Advance(time.Second)
			h.c.Tick(context.Background())
		})
		if want := fmt.Sprintf("answered %d", n); len(lines) != 1 || lines[0] != want {
			b.Fatalf("h2c polls: %q, want %q", lines, want)
		}
	}
	b.ReportMetric(perPoll, "bytes/poll")
	b.ReportMetric(stackPerPoll, "stack-bytes/poll")
}

// stackInUse is the goroutine stacks' memory in use after a collection.
func stackInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.StackInuse)
}

// runH2CClient is the child's main: "hb URL N P" sends N heartbeats from P goroutines, member
// after member; "poll URL N AFTER" holds one long-poll for each of N members and waits for
// their answers, sharing requests if BATCHED ("poll URL N AFTER BATCHED"). It prints "done" last.
func runH2CClient(spec string) int {
	f := strings.Fields(spec)
	var n, p int
	if len(f) != 4 && !(len(f) == 5 && f[0] == "poll") {
		fmt.Fprintln(os.Stderr, "h2c client: bad spec", spec)
		return 2
	}
	fmt.Sscan(f[2], &n)
	fmt.Sscan(f[3], &p)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 0, 128
	t.Protocols = new(http.Protocols)
	t.Protocols.SetUnencryptedHTTP2(true)
	c := client.New(f[1], client.WithHTTPClient(&http.Client{Transport: t}), client.WithTimeout(time.Minute),
		client.WithPollBatching(len(f) == 5 && f[4] == "true"))
	ctx := context.Background()
	if f := os.Getenv("H2C_CLIENT_PROFILE"); f != "" { // the client's CPU profile
		out, err := os.Create(f)
		if err == nil && pprof.StartCPUProfile(out) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	var failed atomic.Int64
	switch f[0] {
	case "hb":
		gens := make([]atomic.Int64, h2cMembers)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range p {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
					m := int(i % h2cMembers)
					hb := client.Heartbeat{CID: h2cCID(m), Topics: []string{"T"}, Confirms: true}
					if g := gens[m].Load(); g > 0 {
						hb.Generations = map[string]int64{"T": g}
					}
					a, err := c.Heartbeat(ctx, "g", hb)
					if err != nil {
						failed.Add(1)
						continue
					}
					gens[m].Store(a.Generations["T"])
				}
			})
		}
		wg.Wait()
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		fmt.Println("cpu", ru.Utime.Nano()+ru.Stime.Nano())
	case "poll":
		after := int64(p)
		var answered atomic.Int64
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if _, err := c.PollAssignment(ctx, "g", h2cCID(i), "", after, time.Minute); err != nil {
					failed.Add(1)
					return
				}
				answered.Add(1)
			})
		}
		wg.Wait()
		fmt.Println("answered", answered.Load())
	}
	if failed.Load() > 0 {
		fmt.Fprintln(os.Stderr, "h2c client:", failed.Load(), "requests failed")
		return 1
	}
	fmt.Println("done")
	return 0
}

func writeHeapProfile(b *testing.B, file string) {
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}
