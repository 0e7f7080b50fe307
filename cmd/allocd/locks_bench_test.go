package main_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allocd/allocd/client"
)

// BenchmarkLockOps measures lock calls through one allocd serve on this machine (its store on
// the data folder's disk, fsync on): W members each send one call at a time, as fast as they
// get answers. It reports calls per second, the latency the client sees (p50, p99) and the
// daemon's CPU in percent of one core. Cases:
//
//   - queue-renew: LockQueues of the member's assigned queues (64 queues over W members), each
//     call a renewal, hence a durable write: the cost of keeping queue locks alive.
//   - message-group-cycle: alternately LockMessageGroup (a new grant) and ReleaseMessageGroup
//     of a message group of the member's own, both writes: ordered processing of one message
//     per hold, the worst case.
//   - check: CheckMessageGroupLock of a live token, no write: what a broker or offset store
//     pays to fence a commit.
//
// Every write waits for its snapshot to be durable; concurrent calls share a write (group
// commit), which the writes/call figure shows. Run with -benchtime 2000x or so.
func BenchmarkLockOps(b *testing.B) { benchLockOps(b, []int{1, 4, 16, 64}) }

// benchLockOps runs BenchmarkLockOps's cases for each member count, against a daemon started
// with daemonFlags.
func benchLockOps(b *testing.B, memberCounts []int, daemonFlags ...string) {
	d := startLoadDaemon(b, daemonFlags...)
	ctx := context.Background()
	c := loadClient(d.url)
	if _, err := c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: 64, WriteQueues: 64}}); err != nil {
		b.Fatal(err)
	}
	for _, w := range memberCounts {
		// One pair of groups per member count, so each case starts settled and clean.
		qg, mg := fmt.Sprintf("q%d", w), fmt.Sprintf("m%d", w)
		if _, err := c.PutGroup(ctx, qg, client.Binding{Strategy: "averagely", Orderly: true}); err != nil {
			b.Fatal(err)
		}
		if _, err := c.PutGroup(ctx, mg, client.Binding{Delivery: client.MessageDelivery, Orderly: true}); err != nil {
			b.Fatal(err)
		}
		cids := make([]string, w)
		for i := range cids {
			cids[i] = fmt.Sprintf("10.0.0.%d@%d", i, 1000+i)
			for _, g := range []string{qg, mg} {
				if _, err := c.Heartbeat(ctx, g, client.Heartbeat{CID: cids[i], Topics: []string{"T"}}); err != nil {
					b.Fatal(err)
				}
			}
		}
		waitSettled(b, c, []string{qg, mg}, "T", w)
		assigned := make([][]client.Queue, w)
		tokens := make([]uint64, w)
		for i, cid := range cids {
			a, err := c.Heartbeat(ctx, qg, client.Heartbeat{CID: cid, Topics: []string{"T"}})
			if err != nil {
				b.Fatal(err)
			}
			assigned[i] = a.Queues["T"]
			if _, _, err := c.LockQueues(ctx, qg, cid, assigned[i], 0); err != nil {
				b.Fatal(err)
			}
			l, err := c.LockMessageGroup(ctx, mg, cid, "T", "checked-"+cid, 0)
			if err != nil || !l.Granted {
				b.Fatal(l, err)
			}
			tokens[i] = l.Token
		}
		cases := []struct {
			name string
			op   func(i, n int) error
		}{
			{"queue-renew", func(i, _ int) error {
				locked, _, err := c.LockQueues(ctx, qg, cids[i], assigned[i], 0)
				if err == nil && len(locked) != len(assigned[i]) {
					err = fmt.Errorf("renewed %d of %d queues", len(locked), len(assigned[i]))
				}
				return err
			}},
			{"message-group-cycle", func(i, n int) error {
				name := fmt.Sprintf("order-%d", i)
				if n%2 == 0 {
					l, err := c.LockMessageGroup(ctx, mg, cids[i], "T", name, 0)
					if err == nil && !l.Granted {
						err = fmt.Errorf("refused: %+v", l)
					}
					cycleTokens[i].Store(l.Token)
					return err
				}
				return c.ReleaseMessageGroup(ctx, mg, cids[i], "T", name, cycleTokens[i].Load(), client.Done)
			}},
			{"check", func(i, _ int) error {
				res, err := c.CheckMessageGroupLock(ctx, mg, "T", "checked-"+cids[i], tokens[i])
				if err == nil && !res.Valid {
					err = fmt.Errorf("a live token does not check")
				}
				return err
			}},
		}
		for _, cs := range cases {
			b.Run(fmt.Sprintf("%s/members=%d", cs.name, w), func(b *testing.B) {
				benchLockCalls(b, d, w, cs.op)
			})
		}
	}
}

// cycleTokens carries each member's last message-group token from its lock call to its release
// (a member that ends a run holding its group renews it at the start of the next).
var cycleTokens [64]atomic.Uint64

func benchLockCalls(b *testing.B, d *loadDaemon, members int, op func(member, n int) error) {
	var (
		next   atomic.Int64
		mu     sync.Mutex
		lat    = make([]time.Duration, 0, b.N)
		failed atomic.Value
		wg     sync.WaitGroup
	)
	writes0 := lockWrites(b, d)
	cpu0, t0 := cpuTime(b, d.pid), time.Now()
	b.ResetTimer()
	for i := range members {
		wg.Go(func() {
			own := make([]time.Duration, 0, b.N/members+1)
			for n := 0; next.Add(1) <= int64(b.N); n++ {
				start := time.Now()
				if err := op(i, n); err != nil {
					failed.Store(err)
					return
				}
				own = append(own, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, own...)
			mu.Unlock()
		})
	}
	wg.Wait()
	b.StopTimer()
	elapsed, cpu := time.Since(t0), cpuTime(b, d.pid)-cpu0
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
	b.ReportMetric(100*cpu.Seconds()/elapsed.Seconds(), "daemon-cpu-%")
	b.ReportMetric(float64(lockWrites(b, d)-writes0)/float64(len(lat)), "writes/call")
}

// lockWrites reads the daemon's count of lock-table snapshot writes from /metrics.
func lockWrites(tb testing.TB, d *loadDaemon) int64 {
	resp, err := http.Get(d.url + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "allocd_lock_snapshot_write_seconds_count "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
