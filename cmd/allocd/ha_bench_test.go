package main_test

// Benchmarks of the etcd mode (issue 12), each next to the bbolt mode in the same run:
//
//	go test -run '^$' -bench 'HA' -benchtime 1x -timeout 30m ./cmd/allocd/
//
// BenchmarkHAFailover wants -benchtime 5x or so (one op is one failover).

import (
	"encoding/json"
	"flag"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/internal/etcdtest"
)

// storeModes are the daemon flags of the two stores: the bbolt file, and a single-member etcd
// on this machine.
func storeModes(b *testing.B) []struct {
	name  string
	flags func() []string
} {
	var etcd *etcdtest.Etcd
	return []struct {
		name  string
		flags func() []string
	}{
		{"bbolt", func() []string { return nil }},
		{"etcd", func() []string {
			if etcd == nil {
				etcd = etcdtest.Start(b)
			}
			return []string{"--etcd", strings.Join(etcd.Endpoints(), ","), "--etcd-prefix", "/bench-" + time.Now().Format("150405.000000") + "/"}
		}},
	}
}

var haGroups = flag.Int("ha.groups", 50, "groups of 100 members in BenchmarkHAHeartbeats (50: 5,000 members)")

// BenchmarkHAHeartbeats is BenchmarkServeHeartbeats's 5,000 members with long-polls (-ha.groups
// sets fewer), once on each store: heartbeats write nothing, so the etcd mode should cost no
// more than bbolt's.
func BenchmarkHAHeartbeats(b *testing.B) {
	for _, m := range storeModes(b) {
		b.Run("store="+m.name, func(b *testing.B) { benchHeartbeats(b, *haGroups, 100, true, *loadDuration, m.flags()...) })
	}
}

// BenchmarkHALockRenew is BenchmarkLockOps with 16 members on each store: every renewal is a
// durable write (an fsync of bbolt's, a fenced etcd transaction), shared by concurrent calls.
func BenchmarkHALockRenew(b *testing.B) {
	for _, m := range storeModes(b) {
		b.Run("store="+m.name, func(b *testing.B) { benchLockOps(b, []int{16}, m.flags()...) })
	}
}

// BenchmarkHAFailover: three replicas with a 2 s session TTL; one op kills the leader with
// SIGKILL and times until a heartbeat is answered by the new leader (the killed replica is
// restarted as a follower outside the timer). ns/op is the mean; max-ms the worst.
func BenchmarkHAFailover(b *testing.B) {
	etcd := etcdtest.Start(b)
	flags := []string{"--etcd", strings.Join(etcd.Endpoints(), ","), "--etcd-prefix", "/bench-failover/",
		"--etcd-session-ttl", "2s", "--session-timeout", "5s"}
	addrs := []string{freeAddr(b), freeAddr(b), freeAddr(b)}
	nodes := make([]*loadDaemon, len(addrs))
	for i, a := range addrs {
		nodes[i] = startLoadDaemon(b, append([]string{"--listen", a}, flags...)...)
	}
	probe := &http.Client{Timeout: 500 * time.Millisecond}
	role := func(i int) string {
		resp, err := probe.Get(nodes[i].url + "/readyz")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		var r struct{ Role string }
		json.NewDecoder(resp.Body).Decode(&r)
		return r.Role
	}
	leader := func() int {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			for i := range nodes {
				if role(i) == "leader" {
					return i
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.Fatal("no leader within 30 s")
		return -1
	}
	var took []time.Duration
	hb := `{"cid":"probe","topics":["T"]}`
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		old := leader()
		b.StartTimer()
		start := time.Now()
		nodes[old].cmd.Process.Kill()
	wait:
		for {
			for i := range nodes {
				if i == old {
					continue
				}
				// 404 (no group "probe") from a leader: a heartbeat answered by the new one.
				resp, err := probe.Post(nodes[i].url+"/v1/groups/probe/heartbeat", "application/json", strings.NewReader(hb))
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusNotFound && resp.Header.Get("X-Allocd-Leader") != "" {
						break wait
					}
				}
			}
			if time.Since(start) > 30*time.Second {
				b.Fatal("no new leader answered within 30 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		for { // until the killed process has let its port go
			c, err := net.DialTimeout("tcp", addrs[old], 100*time.Millisecond)
			if err != nil {
				break
			}
			c.Close()
			time.Sleep(10 * time.Millisecond)
		}
		nodes[old] = startLoadDaemon(b, append([]string{"--listen", addrs[old]}, flags...)...)
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(ms(took[len(took)-1]), "max-ms")
	b.ReportMetric(ms(took[0]), "min-ms")
	b.Logf("failovers %v; load average %s", took, loadavg())
}
