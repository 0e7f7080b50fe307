package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allocd/allocd/client"
)

// replica stands for one allocd replica in front of the env's daemon: leading (serves), not
// leading (503 like a replica that knows no leader), or dead (its listener closed).
type replica struct {
	ts      *httptest.Server
	leading atomic.Bool
	hits    atomic.Int64
}

func newReplica(t *testing.T, e *env) *replica {
	r := &replica{}
	r.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		if !r.leading.Load() {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"no leader: the replicas are electing one"}`))
			return
		}
		w.Header().Set("X-Allocd-Leader", r.ts.URL)
		e.ts.Config.Handler.ServeHTTP(w, req)
	}))
	t.Cleanup(r.ts.Close)
	return r
}

// kill closes the replica's listener and cuts its connections, as kill -9 would.
func (r *replica) kill() {
	r.ts.Listener.Close()
	r.ts.CloseClientConnections()
}

func TestClientParsesSeveralURLs(t *testing.T) {
	c := client.New("http://a:7420, b:7420,", client.WithEndpoints("http://c:7420/"))
	want := []string{"http://a:7420", "http://b:7420", "http://c:7420"}
	if got := c.Endpoints(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Endpoints() = %v, want %v", got, want)
	}
	if c.BaseURL() != "http://a:7420" {
		t.Fatalf("BaseURL() = %q", c.BaseURL())
	}
	bad := client.New("http://a:7420,http://%zz")
	if _, err := bad.ListTopics(context.Background()); err == nil || !strings.Contains(err.Error(), "%zz") {
		t.Fatalf("a malformed URL among several: %v", err)
	}
	if _, err := client.New("").ListTopics(context.Background()); err == nil || !strings.Contains(err.Error(), "no daemon URL") {
		t.Fatalf("no URL: %v", err)
	}
}

// The client skips a dead replica and one that answers 503, finds the leader, and sends later
// requests straight to it.
func TestClientFindsTheLeader(t *testing.T) {
	e := newEnv(t)
	dead, follower, leader := newReplica(t, e), newReplica(t, e), newReplica(t, e)
	dead.kill()
	leader.leading.Store(true)
	c := client.New(dead.ts.URL+","+follower.ts.URL+","+leader.ts.URL, client.WithTimeout(5*time.Second), client.WithFailoverWait(300*time.Millisecond))
	ctx := context.Background()
	if _, err := c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: 4, WriteQueues: 4}}); err != nil {
		t.Fatalf("with one replica dead and one without a leader: %v", err)
	}
	if c.BaseURL() != leader.ts.URL {
		t.Fatalf("after an answer from the leader the client uses %s, want %s", c.BaseURL(), leader.ts.URL)
	}
	before := follower.hits.Load()
	for range 5 {
		if _, err := c.ListTopics(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if follower.hits.Load() != before {
		t.Fatal("requests kept going to a replica that does not lead")
	}
	// Every replica down or leaderless: the client goes round them for its failover wait,
	// then returns the last failure, a 503.
	leader.leading.Store(false)
	before = leader.hits.Load()
	if _, err := c.ListTopics(ctx); client.StatusCode(err) != http.StatusServiceUnavailable {
		t.Fatalf("no leader anywhere: %v, want a 503", err)
	}
	if rounds := leader.hits.Load() - before; rounds < 2 {
		t.Fatalf("the client asked the replicas %d times in its failover wait, want several rounds", rounds)
	}
	// A single daemon: no failover wait, the 503 comes back at once.
	one := newReplica(t, e)
	if _, err := client.New(one.ts.URL).ListTopics(ctx); client.StatusCode(err) != http.StatusServiceUnavailable || one.hits.Load() != 1 {
		t.Fatalf("a single daemon's 503: %v after %d requests", err, one.hits.Load())
	}
}

// While the replicas elect a leader (every one answers 503), a call waits for the election
// instead of failing.
func TestClientWaitsOutAnElection(t *testing.T) {
	e := newEnv(t)
	a, b := newReplica(t, e), newReplica(t, e)
	// b is elected once the replicas have been asked six times in all.
	var asked atomic.Int64
	elect := func(r *replica) http.Handler {
		inner := r.ts.Config.Handler
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if asked.Add(1) == 6 {
				b.leading.Store(true)
			}
			inner.ServeHTTP(w, req)
		})
	}
	a.ts.Config.Handler, b.ts.Config.Handler = elect(a), elect(b)
	c := client.New(a.ts.URL+","+b.ts.URL, client.WithTimeout(time.Second))
	if _, err := c.ListTopics(context.Background()); err != nil {
		t.Fatalf("a call during an election: %v", err)
	}
	if c.BaseURL() != b.ts.URL || asked.Load() < 6 {
		t.Fatalf("after the election the client uses %s (asked %d times)", c.BaseURL(), asked.Load())
	}
}

// A consumer rides a failover: the leader dies under its long-poll and heartbeats, another
// replica takes over the same state, and the application sees no error and keeps its queues.
func TestConsumerRidesAFailover(t *testing.T) {
	e := newEnv(t)
	e.setup(4)
	a, b := newReplica(t, e), newReplica(t, e)
	a.leading.Store(true)
	c := client.New(a.ts.URL+","+b.ts.URL, client.WithTimeout(5*time.Second))
	errs := make(chan error, 100)
	cons := c.NewConsumer("g", "c1", []string{"T"}, client.ConsumerOptions{
		HeartbeatInterval: 200 * time.Millisecond, RetryMin: 20 * time.Millisecond, PollWait: 5 * time.Second,
		OnError: func(err error) { send(errs, err) },
	})
	ctx := context.Background()
	if err := cons.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	first := next(t, cons.Assignments())
	if len(first.Queues) != 4 {
		t.Fatalf("first assignment %+v", first)
	}
	// Failover: a dies (its long-poll cut), b leads over the same state.
	b.leading.Store(true)
	a.kill()
	beats := b.hits.Load()
	waitFor(t, func() bool { return b.hits.Load() >= beats+5 }) // heartbeats and polls reach b
	if cur, ok := cons.Current("T"); !ok || cur.Generation != first.Generation || len(cur.Queues) != 4 {
		t.Fatalf("after the failover the consumer holds %+v (%v), want generation %d with 4 queues", cur, ok, first.Generation)
	}
	select {
	case a := <-cons.Assignments():
		t.Fatalf("a new assignment after a failover that changed no membership: %+v", a)
	case err := <-errs:
		t.Fatalf("the application was told of an error during the failover: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if c.BaseURL() != b.ts.URL {
		t.Fatalf("the client still sends to %s", c.BaseURL())
	}
}
