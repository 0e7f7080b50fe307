package main_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/internal/wasmbuild"
)

// The lock tests run the real binary on a fixed port, so that clients keep their address
// across a kill -9 and restart.

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// lockCluster is a daemon on a fixed address and a data folder that outlive its restarts.
type lockCluster struct {
	t                   *testing.T
	addr, data, plugins string
	mu                  sync.Mutex
	d                   *daemon
}

func newLockCluster(t *testing.T) *lockCluster {
	lc := &lockCluster{t: t, addr: freeAddr(t), data: t.TempDir(), plugins: wasmbuild.BuiltinPlugins(t)}
	lc.d = startDaemon(t, lc.data, lc.plugins, "--listen", lc.addr)
	return lc
}

// restart kills the daemon with SIGKILL (nothing flushed, no goodbye) and starts it again on the
// same folder and address.
func (lc *lockCluster) restart() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.d.cmd.Process.Kill()
	<-lc.d.exited
	lc.d = startDaemon(lc.t, lc.data, lc.plugins, "--listen", lc.addr)
}

func (lc *lockCluster) daemon() *daemon {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.d
}

func (lc *lockCluster) client() *client.Client {
	return client.New("http://"+lc.addr, client.WithTimeout(5*time.Second))
}

// setup declares topic T (4 queues) and the orderly groups qg (queue delivery, averagely) and
// mg (message delivery, hash: the plugin picks who gets contended message groups).
func (lc *lockCluster) setup() {
	d := lc.daemon()
	d.must(http.StatusCreated, "PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	d.must(http.StatusCreated, "PUT", "/v1/groups/qg", `{"strategy":"averagely","orderly":true}`, nil)
	d.must(http.StatusCreated, "PUT", "/v1/groups/mg", `{"strategy":"hash","delivery":"message","orderly":true}`, nil)
}

// beater keeps a member alive in both groups until stopped.
func (lc *lockCluster) beater(c *client.Client, cid string, groups ...string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			for _, g := range groups {
				hctx, hcancel := context.WithTimeout(ctx, time.Second)
				c.Heartbeat(hctx, g, client.Heartbeat{CID: cid, Topics: []string{"T"}})
				hcancel()
			}
			select {
			case <-ctx.Done():
			case <-time.After(e2eSession / 8):
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	lc.t.Cleanup(stop)
	return stop
}

// ---- the model ----

type lkOp uint8

const (
	opLock    lkOp = iota + 1 // lock queues / lock message group (grant, renewal or refusal)
	opUnlock                  // unlock queues
	opRelease                 // release a message group with a token
	opCheck                   // check a token
)

// lkIn is one operation on one lock: a multi-queue call is recorded as one operation per queue.
type lkIn struct {
	key   string // the lock: "qg T/broker-a/0" or "mg T/g1"
	op    lkOp
	cid   string
	token uint64 // release, check
	call  int64  // wall-clock nanoseconds when the call was sent
	lease int64
}

type lkOut struct {
	unknown  bool // the call got no answer: it may or may not have taken effect
	granted  bool
	renewed  bool
	token    uint64
	expires  int64 // the daemon's lease end, wall-clock nanoseconds
	holder   string
	ok       bool // unlocked, released, or the check passed
	ret      int64
	departed uint64 // members that had started to leave (or fall silent) before ret
}

// lkState is one lock as the model sees it. known is false after a grant whose answer was lost:
// its token is unknown, but larger than maxToken. The model is permissive where the history
// leaves it unsure (the earliest possible end of a lease frees it, the latest keeps it live),
// so it fails only on a real violation.
type lkState struct {
	holder string
	token  uint64
	known  bool
	// The lease ends between expMin and expMax: both are the daemon's answer, but after a
	// call whose answer was lost only bounds are known.
	expMin, expMax int64
	maxToken       uint64
}

// lockModel is the sequential specification of one lock. Between calls, a held lock may end
// only through the holder's lease running out (ret >= expires), the holder leaving or falling
// silent (a departure that started before ret), or an unlock or release in the history; a grant
// to anyone else while none of these can have happened is a violation, as is any stale token
// passing a check or a release.
func lockModel(members map[string]int) porcupine.Model {
	departed := func(out lkOut, cid string) bool {
		i, ok := members[cid]
		return ok && out.departed&(1<<i) != 0
	}
	releasable := func(s lkState, out lkOut) bool {
		return s.holder == "" || out.unknown || out.ret >= s.expMin || departed(out, s.holder)
	}
	free := func(s lkState) lkState { return lkState{maxToken: s.maxToken} }
	// is reports whether token may be the holder's.
	is := func(s lkState, token uint64) bool {
		return s.holder != "" && (s.known && s.token == token || !s.known && token > s.maxToken)
	}
	nm := porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range h {
				k := op.Input.(lkIn).key
				if by[k] == nil {
					keys = append(keys, k)
				}
				by[k] = append(by[k], op)
			}
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() []any { return []any{lkState{}} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(lkState), input.(lkIn), output.(lkOut)
			var next []any
			ok := func(n lkState) { next = append(next, n) }
			switch in.op {
			case opLock:
				switch {
				case out.unknown:
					ok(s)
					if s.holder == in.cid {
						r := s
						r.expMax = math.MaxInt64
						ok(r)
					}
					ok(lkState{holder: in.cid, expMin: in.call + in.lease, expMax: math.MaxInt64, maxToken: s.maxToken})
				case out.granted && out.renewed:
					if s.holder == in.cid && is(s, out.token) {
						ok(lkState{holder: in.cid, token: out.token, known: true, expMin: out.expires, expMax: out.expires, maxToken: max(s.maxToken, out.token)})
					}
				case out.granted:
					if out.token > s.maxToken && releasable(s, out) {
						ok(lkState{holder: in.cid, token: out.token, known: true, expMin: out.expires, expMax: out.expires, maxToken: out.token})
					}
				case out.holder != "":
					// Refused, held by out.holder: its lease was live when the daemon answered,
					// so it cannot have run out before the call was sent.
					if s.holder == out.holder && in.call < s.expMax {
						ok(s)
					}
				default:
					// Refused while free (not the owner, or kept for another member).
					if releasable(s, out) {
						ok(free(s))
					}
				}
			case opUnlock:
				switch {
				case out.unknown:
					ok(s)
					if s.holder == in.cid {
						ok(free(s))
					}
				case out.ok:
					if s.holder == in.cid && in.call < s.expMax {
						ok(free(s))
					}
				case s.holder == in.cid:
					if releasable(s, out) {
						ok(free(s))
					}
				default:
					ok(s)
				}
			case opRelease:
				mine := s.holder == in.cid && is(s, in.token)
				switch {
				case out.unknown:
					ok(s)
					if mine {
						ok(free(s))
					}
				case out.ok:
					if mine && in.call < s.expMax {
						ok(free(s))
					}
				case mine:
					if !s.known {
						ok(s) // the unknown token was another one
					}
					if releasable(s, out) {
						ok(free(s))
					}
				default:
					ok(s)
				}
			case opCheck:
				switch {
				case out.ok:
					if is(s, in.token) && in.call < s.expMax {
						r := s
						r.token, r.known, r.maxToken = in.token, true, max(s.maxToken, in.token)
						ok(r)
					}
				case is(s, in.token):
					if !s.known {
						ok(s)
					}
					if releasable(s, out) {
						ok(free(s))
					}
				default:
					ok(s)
				}
			}
			return next
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(lkIn), output.(lkOut)
			name := map[lkOp]string{opLock: "lock", opUnlock: "unlock", opRelease: "release", opCheck: "check"}[in.op]
			switch {
			case out.unknown:
				return fmt.Sprintf("%s %s %s(%d) -> ?", in.cid, name, in.key, in.token)
			case in.op == opLock && out.granted:
				return fmt.Sprintf("%s lock %s -> token %d (renewed %v)", in.cid, in.key, out.token, out.renewed)
			case in.op == opLock:
				return fmt.Sprintf("%s lock %s -> refused, holder %q", in.cid, in.key, out.holder)
			}
			return fmt.Sprintf("%s %s %s(%d) -> %v", in.cid, name, in.key, in.token, out.ok)
		},
		DescribeState: func(state any) string {
			s := state.(lkState)
			if s.holder == "" {
				return fmt.Sprintf("free (max %d)", s.maxToken)
			}
			return fmt.Sprintf("%s:%d known=%v (max %d)", s.holder, s.token, s.known, s.maxToken)
		},
	}
	return nm.ToModel()
}

// TestLockModel checks that the model catches what it is meant to catch, on hand-made histories.
func TestLockModel(t *testing.T) {
	members := map[string]int{"c1": 0, "c2": 1}
	m := lockModel(members)
	const lease = int64(10 * time.Second)
	op := func(call, ret int64, in lkIn, out lkOut) porcupine.Operation {
		in.key, in.call, in.lease = "L", call, lease
		out.ret = ret
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	grant := func(call, ret int64, cid string, token uint64) porcupine.Operation {
		return op(call, ret, lkIn{op: opLock, cid: cid}, lkOut{granted: true, token: token, expires: call + lease})
	}
	for _, c := range []struct {
		name string
		h    []porcupine.Operation
		ok   bool
	}{
		{"handover after unlock", []porcupine.Operation{
			grant(0, 1, "c1", 1),
			op(2, 3, lkIn{op: opUnlock, cid: "c1"}, lkOut{ok: true}),
			grant(4, 5, "c2", 2),
			op(6, 7, lkIn{op: opCheck, token: 1}, lkOut{}),
		}, true},
		{"two holders at once", []porcupine.Operation{grant(0, 1, "c1", 1), grant(2, 3, "c2", 2)}, false},
		{"grant after the lease ran out", []porcupine.Operation{grant(0, 1, "c1", 1), grant(lease+2, lease+3, "c2", 2)}, true},
		{"grant after the holder left", []porcupine.Operation{
			grant(0, 1, "c1", 1),
			op(2, 3, lkIn{op: opLock, cid: "c2"}, lkOut{granted: true, token: 2, departed: 1}),
		}, true},
		{"a stale token checks", []porcupine.Operation{
			grant(0, 1, "c1", 1),
			op(2, 3, lkIn{op: opUnlock, cid: "c1"}, lkOut{ok: true}),
			grant(4, 5, "c2", 2),
			op(6, 7, lkIn{op: opCheck, token: 1}, lkOut{ok: true}),
		}, false},
		{"a stale release passes", []porcupine.Operation{
			grant(0, 1, "c1", 1),
			op(lease+2, lease+3, lkIn{op: opRelease, cid: "c1", token: 1}, lkOut{ok: true}),
		}, false},
		{"a token reused", []porcupine.Operation{
			grant(0, 1, "c1", 5),
			op(2, 3, lkIn{op: opUnlock, cid: "c1"}, lkOut{ok: true}),
			grant(4, 5, "c2", 5),
		}, false},
		{"a renewal with no grant before it", []porcupine.Operation{
			op(0, 3, lkIn{op: opLock, cid: "c1"}, lkOut{granted: true, renewed: true, token: 3, expires: 2 + lease}),
		}, false},
		{"a client's retry renews what its lost first attempt granted", []porcupine.Operation{
			op(0, math.MaxInt64, lkIn{op: opLock, cid: "c1"}, lkOut{unknown: true}), // recorded by retried
			op(0, 3, lkIn{op: opLock, cid: "c1"}, lkOut{granted: true, renewed: true, token: 3, expires: 2 + lease}),
			op(4, 5, lkIn{op: opLock, cid: "c2"}, lkOut{holder: "c1"}),
		}, true},
		{"a lost grant revealed by a renewal", []porcupine.Operation{
			op(0, math.MaxInt64, lkIn{op: opLock, cid: "c1"}, lkOut{unknown: true}),
			op(2, 3, lkIn{op: opLock, cid: "c1"}, lkOut{granted: true, renewed: true, token: 3, expires: 2 + lease}),
			op(4, 5, lkIn{op: opLock, cid: "c2"}, lkOut{holder: "c1"}),
		}, true},
	} {
		if got := porcupine.CheckOperations(m, c.h); got != c.ok {
			t.Errorf("%s: linearizable %v, want %v", c.name, got, c.ok)
		}
	}
}

// ---- recording ----

type lockRecorder struct {
	mu       sync.Mutex
	ops      []porcupine.Operation
	members  map[string]int
	departAt map[string]int64
	tokens   map[string][]uint64 // every token seen per lock, for checks of old ones
	counts   map[string]int
}

func newLockRecorder(cids []string) *lockRecorder {
	r := &lockRecorder{members: map[string]int{}, departAt: map[string]int64{}, tokens: map[string][]uint64{}, counts: map[string]int{}}
	for i, cid := range cids {
		r.members[cid] = i
	}
	return r
}

func wallNow() int64 { return time.Now().UnixNano() }

// depart records that cid starts leaving (or falls silent) now: from here on the daemon may
// drop it, and its locks with it, at any time.
func (r *lockRecorder) depart(cid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.departAt[cid] = wallNow()
}

func (r *lockRecorder) mask(ret int64) uint64 {
	var m uint64
	for cid, at := range r.departAt {
		if at <= ret {
			m |= 1 << r.members[cid]
		}
	}
	return m
}

// outcome classifies a call's error: answered (nil), no effect (a refusal by status, or a
// connection refused: the daemon never read it), or unknown (a lost answer, a 5xx).
type lockOutcome int

const (
	answered lockOutcome = iota
	noEffect
	unknownEffect
)

func classifyLockErr(err error) lockOutcome {
	switch s := client.StatusCode(err); {
	case err == nil:
		return answered
	case s >= 500:
		return unknownEffect
	case s != 0:
		return noEffect
	case errors.Is(err, syscall.ECONNREFUSED):
		return noEffect
	}
	return unknownEffect
}

// attemptLog records whether one call through the client had an attempt that may have taken
// effect before the answer the call returned: a client of several replicas sends the request
// again after a lost answer or a 503 (a leader killed, or its term ended, after it acted), so
// the answer it returns may come after an effect of its own first attempt.
type attemptLog struct{ uncertain atomic.Bool }

type attemptKey struct{}

// trackAttempts gives the call made with the returned context an attemptLog, which an
// attemptTransport fills.
func trackAttempts(ctx context.Context) (context.Context, *attemptLog) {
	l := &attemptLog{}
	return context.WithValue(ctx, attemptKey{}, l), l
}

// attemptTransport marks a call's attemptLog when one of its attempts fails after it may have
// reached a daemon (any failure but a refused connection, or a 5xx answer).
type attemptTransport struct{ rt http.RoundTripper }

func (t attemptTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if l, _ := r.Context().Value(attemptKey{}).(*attemptLog); l != nil {
		if err != nil && !errors.Is(err, syscall.ECONNREFUSED) || err == nil && resp.StatusCode >= 500 {
			l.uncertain.Store(true)
		}
	}
	return resp, err
}

// retried records, for a call whose answer (or definite refusal) came after an attempt that
// may have taken effect, that attempt as an operation of unknown outcome on each of ins.
func (r *lockRecorder) retried(l *attemptLog, outcome lockOutcome, cid string, call, ret int64, ins ...lkIn) {
	if outcome == unknownEffect || !l.uncertain.Load() {
		return
	}
	r.mu.Lock()
	r.counts["answered after a retry"]++
	r.mu.Unlock()
	for _, in := range ins {
		r.add(cid, in, lkOut{unknown: true, ret: ret}, call)
	}
}

func (r *lockRecorder) add(cid string, in lkIn, out lkOut, call int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	in.call = call
	ret := out.ret
	if out.unknown {
		ret = math.MaxInt64
	}
	out.departed = r.mask(out.ret)
	if out.granted {
		r.tokens[in.key] = append(r.tokens[in.key], out.token)
	}
	r.ops = append(r.ops, porcupine.Operation{ClientId: r.members[cid], Input: in, Output: out, Call: call, Return: ret})
	r.count(in, out)
}

func (r *lockRecorder) count(in lkIn, out lkOut) {
	var k string
	switch {
	case out.unknown:
		k = "unknown outcome"
	case in.op == opLock && out.granted && out.renewed:
		k = "renewed"
	case in.op == opLock && out.granted:
		k = "granted"
	case in.op == opLock:
		k = "refused"
	case in.op == opCheck && out.ok:
		k = "check valid"
	case in.op == opCheck:
		k = "check stale"
	case out.ok:
		k = "released"
	default:
		k = "release refused"
	}
	r.counts[k]++
}

func (r *lockRecorder) someToken(rng *rand.Rand, key string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.tokens[key]
	if len(ts) == 0 {
		return uint64(rng.IntN(5) + 1)
	}
	if rng.IntN(3) == 0 {
		return ts[len(ts)-1]
	}
	return ts[rng.IntN(len(ts))]
}

const testLease = 10 * time.Second // the shortest lease the daemon grants

var testQueues = []client.Queue{
	{Topic: "T", BrokerName: "broker-a", QueueID: 0}, {Topic: "T", BrokerName: "broker-a", QueueID: 1},
	{Topic: "T", BrokerName: "broker-a", QueueID: 2}, {Topic: "T", BrokerName: "broker-a", QueueID: 3},
}

var testMessageGroups = []string{"g1", "g2", "g3"}

func queueKey(q client.Queue) string {
	return fmt.Sprintf("qg %s/%s/%d", q.Topic, q.BrokerName, q.QueueID)
}

// queueWorker makes random queue-lock calls as cid until ctx ends.
func (r *lockRecorder) queueWorker(ctx context.Context, c *client.Client, cid string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	mine := map[client.Queue]uint64{}
	for ctx.Err() == nil {
		time.Sleep(time.Duration(5+rng.IntN(25)) * time.Millisecond)
		qs := []client.Queue{testQueues[rng.IntN(4)]}
		if rng.IntN(2) == 0 {
			if q := testQueues[rng.IntN(4)]; q != qs[0] {
				qs = append(qs, q)
			}
		}
		cctx, attempts := trackAttempts(ctx)
		lockIns := func(op lkOp, lease int64) []lkIn {
			var ins []lkIn
			for _, q := range qs {
				ins = append(ins, lkIn{key: queueKey(q), op: op, cid: cid, lease: lease})
			}
			return ins
		}
		call := wallNow()
		switch p := rng.IntN(100); {
		case p < 45:
			locked, refused, err := c.LockQueues(cctx, "qg", cid, qs, testLease)
			ret := wallNow()
			r.retried(attempts, classifyLockErr(err), cid, call, ret, lockIns(opLock, int64(testLease))...)
			switch classifyLockErr(err) {
			case unknownEffect:
				for _, q := range qs {
					r.add(cid, lkIn{key: queueKey(q), op: opLock, cid: cid, lease: int64(testLease)}, lkOut{unknown: true, ret: ret}, call)
				}
			case answered:
				for _, l := range locked {
					mine[l.Queue] = l.Token
					r.add(cid, lkIn{key: queueKey(l.Queue), op: opLock, cid: cid, lease: int64(testLease)},
						lkOut{granted: true, renewed: l.Renewed, token: l.Token, expires: l.Expires.UnixNano(), ret: ret}, call)
				}
				for _, f := range refused {
					r.add(cid, lkIn{key: queueKey(f.Queue), op: opLock, cid: cid, lease: int64(testLease)}, lkOut{holder: f.Holder, ret: ret}, call)
				}
			}
		case p < 65:
			unlocked, err := c.UnlockQueues(cctx, "qg", cid, qs)
			ret := wallNow()
			r.retried(attempts, classifyLockErr(err), cid, call, ret, lockIns(opUnlock, 0)...)
			switch classifyLockErr(err) {
			case unknownEffect:
				for _, q := range qs {
					r.add(cid, lkIn{key: queueKey(q), op: opUnlock, cid: cid}, lkOut{unknown: true, ret: ret}, call)
				}
			case answered:
				for _, q := range qs {
					r.add(cid, lkIn{key: queueKey(q), op: opUnlock, cid: cid}, lkOut{ok: slices.Contains(unlocked, q), ret: ret}, call)
				}
			}
		default:
			q := qs[0]
			token := r.someToken(rng, queueKey(q))
			if t, ok := mine[q]; ok && rng.IntN(2) == 0 {
				token = t
			}
			res, err := c.CheckQueueLock(ctx, "qg", q, token)
			if classifyLockErr(err) == answered {
				r.add(cid, lkIn{key: queueKey(q), op: opCheck, cid: cid, token: token}, lkOut{ok: res.Valid, ret: wallNow()}, call)
			}
		}
	}
}

// groupWorker makes random message-group lock calls as cid until ctx ends.
func (r *lockRecorder) groupWorker(ctx context.Context, c *client.Client, cid string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	mine := map[string]uint64{}
	for ctx.Err() == nil {
		time.Sleep(time.Duration(5+rng.IntN(25)) * time.Millisecond)
		g := testMessageGroups[rng.IntN(len(testMessageGroups))]
		key := "mg T/" + g
		cctx, attempts := trackAttempts(ctx)
		call := wallNow()
		switch p := rng.IntN(100); {
		case p < 45:
			l, err := c.LockMessageGroup(cctx, "mg", cid, "T", g, testLease)
			ret := wallNow()
			r.retried(attempts, classifyLockErr(err), cid, call, ret, lkIn{key: key, op: opLock, cid: cid, lease: int64(testLease)})
			switch classifyLockErr(err) {
			case unknownEffect:
				r.add(cid, lkIn{key: key, op: opLock, cid: cid, lease: int64(testLease)}, lkOut{unknown: true, ret: ret}, call)
			case answered:
				out := lkOut{holder: l.Holder, ret: ret}
				if l.Granted {
					mine[g] = l.Token
					out = lkOut{granted: true, renewed: l.Renewed, token: l.Token, expires: l.Expires.UnixNano(), ret: ret}
				}
				r.add(cid, lkIn{key: key, op: opLock, cid: cid, lease: int64(testLease)}, out, call)
			}
		case p < 65:
			token, ok := mine[g]
			if !ok || rng.IntN(4) == 0 {
				token = r.someToken(rng, key)
			}
			outcome := client.Done
			if rng.IntN(2) == 0 {
				outcome = client.Retry
			}
			err := c.ReleaseMessageGroup(cctx, "mg", cid, "T", g, token, outcome)
			ret := wallNow()
			in := lkIn{key: key, op: opRelease, cid: cid, token: token}
			r.retried(attempts, classifyLockErr(err), cid, call, ret, in)
			switch {
			case err == nil:
				r.add(cid, in, lkOut{ok: true, ret: ret}, call)
			case client.IsConflict(err):
				r.add(cid, in, lkOut{ret: ret}, call)
			case classifyLockErr(err) == unknownEffect:
				r.add(cid, in, lkOut{unknown: true, ret: ret}, call)
			}
		default:
			token := r.someToken(rng, key)
			if t, ok := mine[g]; ok && rng.IntN(2) == 0 {
				token = t
			}
			res, err := c.CheckMessageGroupLock(ctx, "mg", "T", g, token)
			if classifyLockErr(err) == answered {
				r.add(cid, lkIn{key: key, op: opCheck, cid: cid, token: token}, lkOut{ok: res.Valid, ret: wallNow()}, call)
			}
		}
	}
}

// TestLocksLinearizable records randomized concurrent lock calls of five members against the
// real daemon while a member falls silent (expires), one joins (rebalance), one leaves, and
// the daemon is killed with SIGKILL and restarted, and checks the history with porcupine
// against a model where no two members ever hold one lock and no stale token is accepted.
func TestLocksLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon for ~15 s")
	}
	lc := newLockCluster(t)
	lc.setup()
	checkLockHistory(t, lc.client(), lc.beater, "kill -9 and restart", lc.restart, "", nil)
}

// checkLockHistory runs five members' randomized lock calls through c while a member falls
// silent, one joins, fault happens, one leaves, and fault2 (when set) happens, and checks the
// history with porcupine. beater keeps a member alive.
func checkLockHistory(t *testing.T, c *client.Client, beater func(c *client.Client, cid string, groups ...string) (stop func()),
	faultName string, fault func(), fault2Name string, fault2 func()) {
	cids := []string{"c1", "c2", "c3", "c4", "c5"}
	rec := newLockRecorder(cids)
	stops := map[string]func(){}
	workers := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	startMember := func(i int, cid string) {
		stops[cid] = beater(c, cid, "qg", "mg")
		ctx, cancel := context.WithCancel(context.Background())
		workers[cid] = cancel
		wg.Go(func() { rec.queueWorker(ctx, c, cid, uint64(i)) })
		wg.Go(func() { rec.groupWorker(ctx, c, cid, uint64(i)) })
	}
	for i, cid := range cids[:4] {
		startMember(i, cid)
	}
	step := func(d time.Duration, what string, f func()) {
		time.Sleep(d)
		t.Logf("%s: %s", time.Now().Format("15:04:05.000"), what)
		f()
	}
	step(2500*time.Millisecond, "c4 falls silent (its calls go on until the daemon drops it)", func() {
		rec.depart("c4")
		stops["c4"]()
	})
	step(2*time.Second, "c5 joins: the queues are rebalanced", func() { startMember(4, "c5") })
	step(2*time.Second, faultName, fault)
	step(2*time.Second, "c4 stops calling; c2 leaves", func() {
		workers["c4"]()
		rec.depart("c2")
		stops["c2"]()
		workers["c2"]()
		c.Leave(context.Background(), "qg", "c2")
		c.Leave(context.Background(), "mg", "c2")
	})
	if fault2 != nil {
		step(2*time.Second, fault2Name, fault2)
	}
	step(5*time.Second, "stop", func() {
		for _, cancel := range workers {
			cancel()
		}
		wg.Wait()
	})

	rec.mu.Lock()
	defer rec.mu.Unlock()
	t.Logf("%d operations: %v", len(rec.ops), rec.counts)
	for _, k := range []string{"granted", "renewed", "refused", "check valid", "check stale", "released", "release refused"} {
		if rec.counts[k] == 0 {
			t.Errorf("the history has no %q: it does not exercise the locks", k)
		}
	}
	res, info := porcupine.CheckOperationsVerbose(lockModel(rec.members), rec.ops, 30*time.Second)
	if res != porcupine.Ok {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("allocd-locks-%d.html", time.Now().UnixNano()))
		if err := porcupine.VisualizePath(lockModel(rec.members), info, path); err == nil {
			t.Logf("visualization: %s", path)
		}
		t.Fatalf("the lock history is %s", res)
	}
}

// ---- ordered processing ----

// fencedStore is what ordered consumers commit to: per message group, the offset of the next
// message and the largest token that committed. A commit is accepted only with the next offset
// and a token that the daemon says still holds the lock and that is not below one already seen:
// the fencing a broker or offset store does with the daemon's /locks/check.
type fencedStore struct {
	c         *client.Client
	mu        sync.Mutex
	next      map[string]int
	maxToken  map[string]uint64
	log       map[string][]int // committed offsets, in commit order
	active    map[string]string
	overlaps  []string
	refused   atomic.Int64
	processed atomic.Int64
}

func (s *fencedStore) begin(g, cid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if other := s.active[g]; other != "" {
		s.overlaps = append(s.overlaps, fmt.Sprintf("%s processed %s while %s did", cid, g, other))
	}
	s.active[g] = cid
}

func (s *fencedStore) end(g, cid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active[g] == cid {
		delete(s.active, g)
	}
}

func (s *fencedStore) offset(g string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next[g]
}

func (s *fencedStore) commit(ctx context.Context, g string, offset int, token uint64) bool {
	res, err := s.c.CheckMessageGroupLock(ctx, "fifo", "T", g, token)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || !res.Valid || token < s.maxToken[g] || offset != s.next[g] {
		s.refused.Add(1)
		return false
	}
	s.maxToken[g] = token
	s.next[g]++
	s.log[g] = append(s.log[g], offset)
	s.processed.Add(1)
	return true
}

// killSwitch fails every request once cut, like a process that died; with onlyBeats it fails
// only heartbeats (alone or batched), like a member partitioned from the daemon's membership but
// still working.
type killSwitch struct {
	cut, onlyBeats atomic.Bool
	rt             http.RoundTripper
}

func (k *killSwitch) RoundTrip(r *http.Request) (*http.Response, error) {
	if k.cut.Load() && (!k.onlyBeats.Load() || strings.HasSuffix(r.URL.Path, "/heartbeat") || r.URL.Path == "/v1/heartbeats") {
		return nil, errors.New("killed")
	}
	return k.rt.RoundTrip(r)
}

type orderedMember struct {
	cid    string
	kill   *killSwitch
	cons   *client.Consumer
	ord    *client.Ordered
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// TestOrderedProcessingUnderChurn runs consumers that process 20 message groups of 30 messages
// each through the client's Ordered.Do, against the real daemon, while members crash, leave,
// join and one keeps working after being dropped (a zombie). It checks that no message group is
// processed by two live members at once, that every group's messages are committed once each
// and in order, and that the zombie's late commit is refused.
func TestOrderedProcessingUnderChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon for ~15 s")
	}
	lc := newLockCluster(t)
	d := lc.daemon()
	d.must(http.StatusCreated, "PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	d.must(http.StatusCreated, "PUT", "/v1/groups/fifo", `{"strategy":"hash","delivery":"message","orderly":true}`, nil)
	const groups, perGroup = 20, 30
	store := &fencedStore{c: lc.client(), next: map[string]int{}, maxToken: map[string]uint64{}, log: map[string][]int{}, active: map[string]string{}}
	names := make([]string, groups)
	for i := range names {
		names[i] = fmt.Sprintf("order-%d", i)
	}

	var mu sync.Mutex
	members := map[string]*orderedMember{}
	join := func(cid string, workers int) *orderedMember {
		m := &orderedMember{cid: cid, kill: &killSwitch{rt: http.DefaultTransport}}
		c := client.New("http://"+lc.addr, client.WithTimeout(3*time.Second), client.WithHTTPClient(&http.Client{Transport: m.kill}))
		m.cons = c.NewConsumer("fifo", cid, []string{"T"}, client.ConsumerOptions{HeartbeatInterval: e2eSession / 8, DisableLongPoll: true})
		if err := m.cons.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		m.ord = c.NewOrdered(m.cons, client.OrderedOptions{Lease: testLease})
		ctx, cancel := context.WithCancel(context.Background())
		m.cancel = cancel
		for w := range workers {
			rng := rand.New(rand.NewPCG(uint64(len(cid)), uint64(w)))
			m.done.Go(func() {
				for ctx.Err() == nil {
					g := names[rng.IntN(groups)]
					if store.offset(g) >= perGroup {
						if store.processed.Load() >= groups*perGroup {
							return
						}
						continue
					}
					ran, _ := m.ord.TryDo(ctx, "T", g, func(ctx context.Context, l client.MessageGroupLock) error {
						store.begin(g, cid)
						defer store.end(g, cid)
						for range 3 { // up to three messages per hold
							off := store.offset(g)
							if off >= perGroup {
								return nil
							}
							select {
							case <-ctx.Done():
								return context.Cause(ctx)
							case <-time.After(time.Duration(5+rng.IntN(15)) * time.Millisecond):
							}
							if !store.commit(ctx, g, off, l.Token) {
								return errors.New("commit refused")
							}
						}
						return nil
					})
					if !ran { // held elsewhere: try another group
						time.Sleep(time.Millisecond)
					}
				}
			})
		}
		mu.Lock()
		members[cid] = m
		mu.Unlock()
		t.Cleanup(func() { cancel(); m.kill.cut.Store(true); m.done.Wait(); m.cons.Close(context.Background()) })
		return m
	}
	for _, cid := range []string{"m1", "m2", "m3"} {
		join(cid, 3)
	}

	// The zombie: it takes a message group, then is cut off from heartbeats while it works
	// (slowly, ignoring its context); the daemon drops it and gives the group to others. Its
	// commit after that must be refused.
	zombie := join("zombie", 0)
	zombieDone := make(chan error, 1)
	go func() {
		zombieDone <- zombie.ord.Do(context.Background(), "T", "order-0", func(_ context.Context, l client.MessageGroupLock) error {
			off := store.offset("order-0")
			zombie.kill.onlyBeats.Store(true)
			zombie.kill.cut.Store(true)
			time.Sleep(e2eSession + 2*time.Second) // dropped meanwhile
			if store.commit(context.Background(), "order-0", off, l.Token) {
				return errors.New("the zombie's commit was accepted")
			}
			return nil
		})
	}()

	get := func(cid string) *orderedMember {
		mu.Lock()
		defer mu.Unlock()
		return members[cid]
	}
	churn := []func(){
		func() { // a crash: everything stops at once, nothing is released
			m := get("m1")
			m.kill.cut.Store(true)
			m.cancel()
		},
		func() { join("m4", 3) },
		func() { // a clean leave
			m := get("m2")
			m.cancel()
			m.done.Wait()
			m.cons.Close(context.Background())
		},
		func() { join("m5", 3) },
	}
	deadline := time.Now().Add(40 * time.Second)
	// The churn happens at 15%, 35%, 55% and 75% of the messages.
	for i := 0; store.processed.Load() < groups*perGroup; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d messages processed in 40 s", store.processed.Load(), groups*perGroup)
		}
		time.Sleep(10 * time.Millisecond)
		if i < len(churn) && store.processed.Load() >= int64(groups*perGroup*(15+20*i)/100) {
			t.Logf("churn %d at %d messages", i+1, store.processed.Load())
			churn[i]()
			i++
		}
	}
	if err := <-zombieDone; err == nil || !errors.Is(err, client.ErrLockLost) && !strings.Contains(err.Error(), "refused") {
		t.Errorf("the zombie's Do returned %v, want its lock lost", err)
	}

	store.mu.Lock()
	defer store.mu.Unlock()
	for _, o := range store.overlaps {
		t.Error(o)
	}
	for _, g := range names {
		want := make([]int, perGroup)
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(store.log[g], want) {
			t.Errorf("%s committed %v, want 0..%d in order", g, store.log[g], perGroup-1)
		}
	}
	t.Logf("%d messages committed in order; %d commits refused (stale tokens or offsets)", store.processed.Load(), store.refused.Load())
}
