package lock

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestRandomHistories replays many seeded random sequences of operations:
// locks, renewals, unlocks and releases (with current and stale tokens),
// checks, members leaving and rejoining, rebalances, clock jumps (also
// backwards), ticks and restarts from the last persisted snapshot. An oracle
// follows what every caller was told and asserts, after every call, that:
//
//   - no two members ever believe they hold the same lock at the same time;
//   - a new grant's token exceeds every token issued before, a renewal keeps
//     it, and a lapsed lease is never renewed;
//   - a stale token never passes Check nor releases, and a live one does;
//   - every refusal has a reason the oracle can see (no spurious refusals);
//   - attempt numbers and DeadLetter follow the counted failures;
//   - persisting only when Version changes loses nothing.
func TestRandomHistories(t *testing.T) {
	seeds, steps := 400, 300
	if testing.Short() {
		seeds = 50
	}
	seen := make(map[string]int)
	for seed := range seeds {
		if !t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runHistory(t, uint64(seed), steps, seen) }) {
			return
		}
	}
	// The generator must keep reaching every interesting case, or the
	// properties above hold vacuously.
	for _, c := range []string{
		"grant", "renew", "refused " + string(ReasonHeld), "refused " + string(ReasonNotOwner),
		"refused " + string(ReasonReserved), "release", "stale release", "valid check", "stale check",
		"dead letter", "released by member gone", "expired by tick", "restart",
	} {
		if seen[c] == 0 {
			t.Errorf("no history reached %q", c)
		}
	}
	t.Logf("cases reached: %v", seen)
}

const propMaxAttempts = 3

type oracleKey struct {
	group string
	lock  Lock
}

// belief is a grant as its holder was told it.
type belief struct {
	holder  string
	token   uint64
	expires time.Time
}

type oracle struct {
	t        *testing.T
	rng      *rand.Rand
	dir      *fakeDirectory
	table    *Table
	cfg      Config
	now      time.Time // the Table's clock: the latest clock it was given
	clock    time.Time // the daemon's wall clock, which may step back
	floor    time.Time // but not behind what the Table had seen before a restart
	held     map[oracleKey]belief
	failures map[oracleKey]int
	issued   []uint64 // every token ever granted, for stale checks
	last     uint64   // the largest token ever granted
	// persisted is the last snapshot the daemon made durable, taken only
	// when Version changed, as the package documentation prescribes.
	persisted []byte
	version   uint64
	log       []string
	seen      map[string]int // how often each case was reached, over all seeds
	// asks mirrors the Table's soft state: when each member was last
	// refused each message group. Lost on restart, as in the Table.
	asks map[oracleKey]map[string]time.Time
}

var (
	propCIDs   = []string{"c1", "c2", "c3", "c4"}
	propQueues = []Queue{{"T", "b", 0}, {"T", "b", 1}, {"T", "b", 2}, {"U", "b", 0}}
	propGroups = []MessageGroup{{"T", "g0"}, {"T", "g1"}, {"T", "g2"}, {"U", "g0"}}
	propLeases = []time.Duration{0, 10 * time.Second, 15 * time.Second, 30 * time.Second, 2 * time.Minute}
)

func runHistory(t *testing.T, seed uint64, steps int, seen map[string]int) {
	o := &oracle{
		seen:     seen,
		t:        t,
		rng:      rand.New(rand.NewPCG(seed, 0x10c)),
		dir:      newFakeDirectory(),
		now:      time.Time{}, // a new Table has seen no time yet
		clock:    epoch,
		held:     make(map[oracleKey]belief),
		failures: make(map[oracleKey]int),
		asks:     make(map[oracleKey]map[string]time.Time),
	}
	o.dir.groups["q"] = GroupConfig{Kind: KindQueue}
	o.dir.groups["m"] = GroupConfig{Kind: KindMessageGroup, MaxAttempts: propMaxAttempts}
	o.dir.members["q"] = slices.Clone(propCIDs)
	o.dir.members["m"] = slices.Clone(propCIDs)
	o.rebalance()
	prefs := make(map[MessageGroup]string)
	for _, g := range propGroups {
		// Sometimes a member that will have left: no preference then.
		prefs[g] = propCIDs[o.rng.IntN(len(propCIDs))]
	}
	o.dir.prefs["m"] = prefs
	o.cfg = Config{Directory: o.dir, Preference: o.dir, Patience: time.Duration(1+o.rng.IntN(8)) * time.Second}
	var err error
	if o.table, err = New(o.cfg); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("seed %d history:\n%s", seed, joinLines(o.log))
		}
	}()
	o.persist()
	for range steps {
		switch n := o.rng.IntN(100); {
		case n < 20:
			o.lockQueues()
		case n < 27:
			o.unlockQueues()
		case n < 50:
			o.lockMessageGroup()
		case n < 62:
			o.releaseMessageGroup()
		case n < 72:
			o.check()
		case n < 76:
			o.memberGone()
		case n < 80:
			o.rejoin()
		case n < 84:
			o.rebalance()
		case n < 87:
			o.tick()
		case n < 90:
			o.restart()
		default:
			o.advance()
		}
		o.persist()
		if t.Failed() {
			return
		}
	}
}

func joinLines(ss []string) string {
	out := ""
	for _, s := range ss {
		out += s + "\n"
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// sync moves the oracle's copy of the Table's clock as a call at o.clock
// moves the Table's; a call refused for bad input moves nothing.
func (o *oracle) sync() {
	if o.clock.After(o.now) {
		o.now = o.clock
	}
}

func (o *oracle) logf(format string, args ...any) {
	o.log = append(o.log, fmt.Sprintf("%v ", o.now.Sub(epoch))+fmt.Sprintf(format, args...))
}

func (o *oracle) failf(format string, args ...any) {
	o.t.Helper()
	o.t.Errorf("at %v: "+format, append([]any{o.now.Sub(epoch)}, args...)...)
}

func (o *oracle) pick(ss []string) string { return ss[o.rng.IntN(len(ss))] }

func (o *oracle) lease() time.Duration { return propLeases[o.rng.IntN(len(propLeases))] }

func effective(lease time.Duration) time.Duration {
	if lease == 0 {
		return DefaultLease
	}
	return lease
}

// persist makes the snapshot durable if, and only if, Version changed.
func (o *oracle) persist() {
	if v := o.table.Version(); v != o.version || o.persisted == nil {
		b, err := json.Marshal(o.table.Snapshot())
		if err != nil {
			o.t.Fatal(err)
		}
		o.persisted, o.version = b, v
	}
}

func (o *oracle) restart() {
	var s Snapshot
	if err := json.Unmarshal(o.persisted, &s); err != nil {
		o.t.Fatal(err)
	}
	tb, err := New(o.cfg)
	if err != nil {
		o.t.Fatal(err)
	}
	if err := tb.Restore(s); err != nil {
		o.t.Fatalf("restore: %v", err)
	}
	o.table, o.version = tb, tb.Version()
	// The restarted daemon's wall clock never reads behind what the old
	// process had seen (see "Restarts" in the package documentation); the
	// transcripts cover a restart onto a clock that is behind.
	o.floor = o.now
	o.clock = later(o.clock, o.floor)
	o.now = s.Clock
	clear(o.asks)
	o.logf("restart")
	o.seen["restart"]++
}

// advance moves the daemon's wall clock, now and then backwards; the Table's
// clock never goes back.
func (o *oracle) advance() {
	// Whole seconds half the time, so that calls land exactly on lease
	// expiries (leases are whole seconds too).
	d := time.Duration(o.rng.IntN(40)) * time.Second
	if o.rng.IntN(2) == 0 {
		d = time.Duration(o.rng.IntN(40_000)) * time.Millisecond
	}
	if o.rng.IntN(10) == 0 {
		d = -d / 4
	}
	o.clock = later(o.clock.Add(d), o.floor)
	o.logf("clock %v", o.clock.Sub(epoch))
}

// settle ends the oracle's belief in k if its lease has run out, counting a
// failed attempt as the Table does.
func (o *oracle) settle(k oracleKey) {
	if b, ok := o.held[k]; ok && !o.now.Before(b.expires) {
		delete(o.held, k)
		if k.lock.Kind == KindMessageGroup {
			o.failures[k]++
		}
	}
}

func (o *oracle) live(group, cid string) bool { return slices.Contains(o.dir.members[group], cid) }

// reservedFor returns the member a free message group is kept for from cid,
// and until when, by the rule in the package documentation.
func (o *oracle) reservedFor(k oracleKey, cid string) (string, time.Time) {
	p := o.dir.prefs[k.group][k.lock.MessageGroup]
	at, asked := o.asks[k][p]
	if p == cid || !o.live(k.group, p) || !asked || !o.now.Before(at.Add(o.cfg.Patience)) {
		return "", time.Time{}
	}
	return p, at.Add(o.cfg.Patience)
}

func (o *oracle) ask(k oracleKey, cid string) {
	if o.asks[k] == nil {
		o.asks[k] = make(map[string]time.Time)
	}
	o.asks[k][cid] = o.now
}

// granted checks a grant against the oracle and records it.
func (o *oracle) granted(k oracleKey, cid string, g Grant, lease time.Duration) {
	o.t.Helper()
	b, held := o.held[k]
	switch {
	case g.Renewed && (!held || b.holder != cid || b.token != g.Token):
		o.failf("%s renewed %s in %s with token %d, but holds %+v (held %v)", cid, k.lock, k.group, g.Token, b, held)
	case !g.Renewed && held:
		o.failf("%s granted %s in %s with token %d while %s holds it until %v with token %d",
			cid, k.lock, k.group, g.Token, b.holder, b.expires.Sub(epoch), b.token)
	case !g.Renewed && g.Token <= o.last:
		o.failf("new token %d for %s is not above the last token %d", g.Token, k.lock, o.last)
	case !g.Expires.Equal(o.now.Add(effective(lease))):
		o.failf("grant of %s expires at %v, want %v", k.lock, g.Expires.Sub(epoch), o.now.Add(effective(lease)).Sub(epoch))
	}
	if k.lock.Kind == KindMessageGroup && !g.Renewed {
		if p, until := o.reservedFor(k, cid); p != "" {
			o.failf("%s granted %s, which is reserved for %s until %v", cid, k.lock, p, until.Sub(epoch))
		}
		delete(o.asks[k], cid)
	}
	if k.lock.Kind == KindMessageGroup {
		f := o.failures[k]
		if g.Attempt != f+1 || g.DeadLetter != (f >= propMaxAttempts) {
			o.failf("grant of %s: attempt %d dead-letter %v, want attempt %d after %d failures", k.lock, g.Attempt, g.DeadLetter, f+1, f)
		}
	}
	if g.Renewed {
		o.seen["renew"]++
	} else {
		o.seen["grant"]++
	}
	if g.DeadLetter {
		o.seen["dead letter"]++
	}
	if !g.Renewed {
		o.last = g.Token
		o.issued = append(o.issued, g.Token)
	}
	o.held[k] = belief{holder: cid, token: g.Token, expires: g.Expires}
}

// refusedFor checks that a refusal has a reason the oracle can see.
func (o *oracle) refusedFor(k oracleKey, cid string, r Refusal) {
	o.t.Helper()
	b, held := o.held[k]
	o.seen["refused "+string(r.Reason)]++
	switch r.Reason {
	case ReasonHeld:
		if !held || b.holder == cid || r.Holder != b.holder {
			o.failf("%s refused %s as held by %q, but the oracle has %+v (held %v)", cid, k.lock, r.Holder, b, held)
		}
		if r.RetryAfter <= 0 || r.RetryAfter > b.expires.Sub(o.now) {
			o.failf("refusal of %s: retry after %v, lease ends in %v", k.lock, r.RetryAfter, b.expires.Sub(o.now))
		}
	case ReasonNotOwner:
		if owner := o.dir.Owner(k.group, k.lock.Queue); owner == cid || r.Owner != owner {
			o.failf("%s refused %s as not owner (%q), but the owner is %q", cid, k.lock, r.Owner, owner)
		}
	case ReasonReserved:
		p, until := o.reservedFor(k, cid)
		if held || p == "" || r.Owner != p || r.RetryAfter != until.Sub(o.now) {
			o.failf("%s refused %s as reserved for %q for %v; oracle: held %v, reserved for %q until %v",
				cid, k.lock, r.Owner, r.RetryAfter, held, p, until.Sub(epoch))
		}
	default:
		o.failf("refusal of %s with reason %q", k.lock, r.Reason)
	}
}

// callErr accepts only the errors a well-formed call can get.
func (o *oracle) callErr(group, cid string, err error) bool {
	o.t.Helper()
	if err == nil {
		return false
	}
	var me *MemberError
	if !errors.As(err, &me) || o.live(group, cid) {
		o.failf("unexpected error: %v", err)
	}
	return true
}

func (o *oracle) lockQueues() {
	cid, lease := o.pick(propCIDs), o.lease()
	var qs []Queue
	for _, q := range propQueues {
		if o.rng.IntN(2) == 0 {
			qs = append(qs, q)
		}
	}
	locked, refused, err := o.table.LockQueues(o.clock, "q", cid, qs, lease)
	o.logf("%s lock queues %v lease %v: %v %v %v", cid, qs, lease, locked, refused, err)
	if o.callErr("q", cid, err) {
		return
	}
	o.sync()
	if len(locked)+len(refused) != len(qs) {
		o.failf("%d queues asked, %d answers", len(qs), len(locked)+len(refused))
	}
	for _, g := range locked {
		k := oracleKey{"q", g.Lock}
		if owner := o.dir.Owner("q", g.Lock.Queue); owner != cid {
			o.failf("%s granted %s, which the generation assigns to %q", cid, g.Lock, owner)
		}
		o.settle(k)
		o.granted(k, cid, g, lease)
	}
	for _, r := range refused {
		k := oracleKey{"q", r.Lock}
		o.settle(k)
		o.refusedFor(k, cid, r)
	}
}

func (o *oracle) unlockQueues() {
	o.sync()
	cid := o.pick(propCIDs)
	qs := []Queue{propQueues[o.rng.IntN(len(propQueues))], propQueues[o.rng.IntN(len(propQueues))]}
	unlocked, err := o.table.UnlockQueues(o.clock, "q", cid, qs)
	o.logf("%s unlock %v: %v %v", cid, qs, unlocked, err)
	if err != nil {
		o.failf("unlock: %v", err)
	}
	for i, q := range qs {
		if slices.Contains(qs[:i], q) {
			continue
		}
		k := oracleKey{"q", QueueLock(q)}
		o.settle(k)
		b, held := o.held[k]
		mine := held && b.holder == cid
		if mine != slices.Contains(unlocked, q) {
			o.failf("%s unlocking %s: unlocked %v, oracle holds %+v", cid, q, unlocked, b)
		}
		if mine {
			delete(o.held, k)
		}
	}
}

func (o *oracle) lockMessageGroup() {
	cid, lease := o.pick(propCIDs), o.lease()
	mg := propGroups[o.rng.IntN(len(propGroups))]
	g, r, err := o.table.LockMessageGroup(o.clock, "m", cid, mg, lease)
	o.logf("%s lock %s lease %v: %+v %+v %v", cid, mg, lease, g, r, err)
	if o.callErr("m", cid, err) {
		return
	}
	o.sync()
	k := oracleKey{"m", MessageGroupLock(mg)}
	o.settle(k)
	if r != nil {
		o.refusedFor(k, cid, *r)
		o.ask(k, cid)
		return
	}
	o.granted(k, cid, g, lease)
}

func (o *oracle) releaseMessageGroup() {
	o.sync()
	cid := o.pick(propCIDs)
	mg := propGroups[o.rng.IntN(len(propGroups))]
	k := oracleKey{"m", MessageGroupLock(mg)}
	o.settle(k)
	b, held := o.held[k]
	token := o.someToken()
	if held && o.rng.IntN(3) > 0 {
		// Mostly the holder releasing its own grant; sometimes its
		// token presented by someone else.
		token = b.token
		if o.rng.IntN(4) > 0 {
			cid = b.holder
		}
	}
	outcome := Done
	if o.rng.IntN(2) == 0 {
		outcome = Retry
	}
	err := o.table.ReleaseMessageGroup(o.clock, "m", cid, mg, token, outcome)
	o.logf("%s release %s token %d %v: %v", cid, mg, token, outcome, err)
	valid := held && b.holder == cid && b.token == token
	var se *StaleError
	switch {
	case valid && err != nil:
		o.failf("%s's release of %s with live token %d refused: %v", cid, mg, token, err)
	case !valid && !errors.As(err, &se):
		o.failf("%s's release of %s with token %d accepted or wrongly refused (%v); oracle holds %+v", cid, mg, token, err, b)
	case !valid:
		o.seen["stale release"]++
	case valid:
		o.seen["release"]++
		delete(o.held, k)
		if outcome == Done {
			o.failures[k] = 0
		} else {
			o.failures[k]++
		}
	}
}

// someToken returns a token from history, or one never issued.
func (o *oracle) someToken() uint64 {
	if len(o.issued) == 0 || o.rng.IntN(5) == 0 {
		return o.last + uint64(o.rng.IntN(3))
	}
	return o.issued[o.rng.IntN(len(o.issued))]
}

func (o *oracle) check() {
	o.sync()
	var k oracleKey
	if o.rng.IntN(2) == 0 {
		k = oracleKey{"q", QueueLock(propQueues[o.rng.IntN(len(propQueues))])}
	} else {
		k = oracleKey{"m", MessageGroupLock(propGroups[o.rng.IntN(len(propGroups))])}
	}
	o.settle(k)
	b, held := o.held[k]
	token := o.someToken()
	if held && o.rng.IntN(2) == 0 {
		token = b.token
	}
	err := o.table.Check(o.clock, k.group, k.lock, token)
	o.logf("check %s token %d: %v", k.lock, token, err)
	var se *StaleError
	valid := held && b.token == token
	o.seen[map[bool]string{true: "valid check", false: "stale check"}[valid]]++
	switch {
	case valid && err != nil:
		o.failf("live token %d of %s refused: %v", token, k.lock, err)
	case !valid && !errors.As(err, &se):
		o.failf("stale token %d of %s accepted or wrongly refused (%v); oracle holds %+v", token, k.lock, err, b)
	}
}

func (o *oracle) memberGone() {
	group := o.pick([]string{"q", "m"})
	live := o.dir.members[group]
	if len(live) == 0 {
		return
	}
	cid := o.pick(live)
	o.sync()
	o.dir.members[group] = slices.DeleteFunc(slices.Clone(live), func(m string) bool { return m == cid })
	gone, err := o.table.MemberGone(o.clock, group, cid)
	o.logf("%s gone from %s: %v %v", cid, group, gone, err)
	if err != nil {
		o.failf("member gone: %v", err)
	}
	var want []oracleKey
	for k, b := range o.held {
		if k.group != group {
			continue
		}
		o.settle(k)
		if _, still := o.held[k]; still && b.holder == cid {
			want = append(want, k)
			delete(o.held, k)
			if k.lock.Kind == KindMessageGroup {
				o.failures[k]++
			}
		}
	}
	for _, a := range o.asks {
		if group == "m" {
			delete(a, cid)
		}
	}
	o.seen["released by member gone"] += len(gone)
	if len(gone) != len(want) {
		o.failf("member gone released %v, oracle expected %v", gone, want)
	}
	for _, l := range gone {
		if l.Holder != cid || !slices.Contains(want, oracleKey{group, l.Lock}) {
			o.failf("member gone released %+v, oracle expected %v", l, want)
		}
	}
	if group == "q" {
		o.rebalance()
	}
}

func (o *oracle) rejoin() {
	group := o.pick([]string{"q", "m"})
	cid := o.pick(propCIDs)
	if o.live(group, cid) {
		return
	}
	o.dir.members[group] = append(slices.Clone(o.dir.members[group]), cid)
	slices.Sort(o.dir.members[group])
	o.logf("%s rejoins %s", cid, group)
	if group == "q" {
		o.rebalance()
	}
}

// rebalance gives each queue to a random live member, or to nobody.
func (o *oracle) rebalance() {
	owners := make(map[Queue]string)
	live := o.dir.members["q"]
	for _, q := range propQueues {
		if len(live) > 0 && o.rng.IntN(8) > 0 {
			owners[q] = o.pick(live)
		}
	}
	o.dir.owners["q"] = owners
	o.logf("rebalance %v", owners)
}

func (o *oracle) tick() {
	o.sync()
	expired := o.table.Tick(o.clock)
	o.logf("tick: %v", expired)
	o.seen["expired by tick"] += len(expired)
	for _, l := range expired {
		k := oracleKey{l.Group, l.Lock}
		if b, ok := o.held[k]; ok && b.token == l.Token && o.now.Before(b.expires) {
			o.failf("tick expired %+v, which the oracle holds until %v", l, b.expires.Sub(epoch))
		}
	}
	for k := range o.held {
		o.settle(k)
	}
}
