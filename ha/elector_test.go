package ha

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/allocd/allocd/internal/etcdtest"
)

// candidate is one Elector on the real etcd, recording its terms.
type candidate struct {
	e      *Elector
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	terms []Term
	in    bool // inside Lead
}

func (c *candidate) lastTerm() Term {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.terms[len(c.terms)-1]
}

func (c *candidate) leading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.in
}

func startCandidate(t *testing.T, etcd *etcdtest.Etcd, name string, overlap func(name string, on bool)) *candidate {
	t.Helper()
	c := &candidate{done: make(chan struct{})}
	var err error
	c.e, err = New(Config{
		Client: etcd.Client(t), Prefix: "/test/leader", Value: "http://" + name, TTL: 2 * time.Second,
		RetryEvery: 100 * time.Millisecond, Logger: zerolog.Nop(),
		Lead: func(ctx context.Context, tm Term) error {
			c.mu.Lock()
			c.terms = append(c.terms, tm)
			c.in = true
			c.mu.Unlock()
			overlap(name, true)
			<-ctx.Done()
			overlap(name, false)
			c.mu.Lock()
			c.in = false
			c.mu.Unlock()
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { c.e.Run(ctx); close(c.done) }()
	t.Cleanup(func() { cancel(); <-c.done })
	return c
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// One term at a time; a leader that shuts down hands over at once; etcd gone makes the leader
// step down by its deadline, and a leader is elected again when etcd is back, with a higher
// revision.
func TestElectorOnEtcd(t *testing.T) {
	etcd := etcdtest.Start(t)
	var mu sync.Mutex
	leaders := map[string]bool{}
	overlap := func(name string, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			for other := range leaders {
				t.Errorf("%s leads while %s does", name, other)
			}
			leaders[name] = true
		} else {
			delete(leaders, name)
		}
	}
	a := startCandidate(t, etcd, "a", overlap)
	waitUntil(t, "a leads", 10*time.Second, a.leading)
	b := startCandidate(t, etcd, "b", overlap)
	waitUntil(t, "b sees a as leader", 5*time.Second, func() bool {
		role, l := b.e.Leader()
		return role == RoleFollower && l == "http://a"
	})
	if role, l := a.e.Leader(); role != RoleLeader || l != "http://a" || !a.e.Leading() {
		t.Fatalf("a: %s %s", role, l)
	}

	// a shuts down: its lease is revoked, b leads well within a TTL.
	start := time.Now()
	a.cancel()
	<-a.done
	waitUntil(t, "b leads after a shut down", 2*time.Second, b.leading)
	t.Logf("handover on shutdown: %v", time.Since(start))
	rev1 := b.lastTerm().Rev
	if rev1 <= a.lastTerm().Rev {
		t.Fatalf("b's term revision %d is not above a's %d", rev1, a.lastTerm().Rev)
	}

	// etcd stops: b steps down by its deadline (TTL - margin after its last keep-alive).
	etcd.Stop()
	stopped := time.Now()
	waitUntil(t, "b steps down with etcd stopped", 3*time.Second, func() bool { return !b.leading() })
	if b.e.Leading() {
		t.Fatal("Leading() after the term ended")
	}
	if role, _ := b.e.Leader(); role != RoleCandidate {
		t.Fatalf("b's role with etcd stopped: %s", role)
	}
	t.Logf("step-down after etcd stopped: %v", time.Since(stopped))
	etcd.Start()
	waitUntil(t, "b leads again once etcd is back", 15*time.Second, b.leading)
	if rev2 := b.lastTerm().Rev; rev2 <= rev1 {
		t.Fatalf("the new term's revision %d is not above the last one's %d", rev2, rev1)
	}
	if b.e.withoutLeader() <= 0 {
		t.Fatal("no time without a leader was counted")
	}
}
