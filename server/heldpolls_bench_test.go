package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/internal/nativestrategy"
	"github.com/allocd/allocd/server"
	"github.com/allocd/allocd/store"
)

// BenchmarkHeldPolls measures what one held long-poll costs the server's process: N members
// each hold an HTTP/1.1 long-poll (a raw connection that sent its request and waits), and the
// heap and goroutine stacks in use grow by bytes/poll. One op is one round of N polls opened,
// counted and answered by a new generation.
//
//	go test -run '^$' -bench HeldPolls -benchtime 3x ./server/
func BenchmarkHeldPolls(b *testing.B) {
	const n = 2000
	st, err := store.Open(b.TempDir(), store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	clock := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	c, err := coordinator.New(coordinator.Options{Store: st, Allocator: nativestrategy.Allocator{}, Clock: clock, SessionTimeout: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	s, err := server.New(server.Options{Coordinator: c})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	if _, _, err := c.PutTopic("T", []coordinator.Broker{{Name: "b", ReadQueues: 64, WriteQueues: 64}}); err != nil {
		b.Fatal(err)
	}
	if _, _, err := c.PutGroup("g", coordinator.Binding{Strategy: "averagely"}); err != nil {
		b.Fatal(err)
	}
	cids := make([]string, n)
	for i := range cids {
		cids[i] = fmt.Sprintf("10.0.%d.%d@%d", i/256, i%256, 1000+i)
	}
	gen := func() int64 {
		for _, cid := range cids {
			if _, err := c.Heartbeat("g", coordinator.Heartbeat{CID: cid, Topics: []string{"T"}}); err != nil {
				b.Fatal(err)
			}
		}
		clock.Advance(time.Second)
		c.Tick(context.Background())
		a, _, err := c.Poll("g", cids[0], nil)
		if err != nil {
			b.Fatal(err)
		}
		return a.Generations["T"]
	}
	addr := ts.Listener.Addr().String()
	var perPoll float64
	for i := range b.N {
		if _, err := c.Heartbeat("g", coordinator.Heartbeat{CID: "extra", Topics: []string{"T"}}); err != nil {
			b.Fatal(err)
		}
		after := gen()
		before := inUse()
		conns := make([]net.Conn, len(cids))
		for j, cid := range cids {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(conn, "GET /v1/groups/g/assignment?cid=%s&after=%d&wait=60s HTTP/1.1\r\nHost: allocd\r\n\r\n", cid, after)
			conns[j] = conn
		}
		for s.Waiting() < int64(len(conns)) {
			time.Sleep(time.Millisecond)
		}
		if i == 0 && os.Getenv("HELDPOLLS_HEAP") != "" {
			runtime.GC()
			f, _ := os.Create(os.Getenv("HELDPOLLS_HEAP"))
			pprof.WriteHeapProfile(f)
			f.Close()
		}
		perPoll = float64(inUse()-before) / float64(len(conns))
		// A member leaves: every poll answers with the new generation.
		c.Leave("g", "extra")
		clock.Advance(time.Second)
		c.Tick(context.Background())
		for _, conn := range conns {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("poll answered %d", resp.StatusCode)
			}
			conn.Close()
		}
	}
	b.ReportMetric(perPoll, "bytes/poll")
}

// inUse is the heap and stack memory in use after a collection.
func inUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}
