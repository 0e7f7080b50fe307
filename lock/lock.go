package lock

import (
	"cmp"
	"slices"
	"strconv"
	"time"
)

// Defaults and bounds. One set of lease bounds serves both kinds of lock:
// RocketMQ's queue locks live 60 s and its FIFO invisible time may be 10 s to
// 12 h; a holder that needs longer renews.
const (
	DefaultLease       = 60 * time.Second
	MinLease           = 10 * time.Second
	MaxLease           = 12 * time.Hour
	DefaultMaxAttempts = 17 // RocketMQ's 16 retries plus the first delivery
	DefaultPatience    = 5 * time.Second
	DefaultIdleTTL     = 24 * time.Hour
)

// Directory is the daemon's current view of its groups. The Table consults it
// on lock calls and never changes it. Its methods must answer from memory,
// the same way for the same state, and must not call back into the Table.
type Directory interface {
	// Group returns the configuration of an orderly group, or false if
	// the group does not exist or is not orderly.
	Group(group string) (GroupConfig, bool)
	// Members returns the group's live members in the order the group's
	// plugin sees them. The Table never modifies the slice.
	Members(group string) []string
	// Owner returns the member the group's current generation assigns q
	// to, or "" if none.
	Owner(group string, q Queue) string
}

// Preference picks which live member should own a free message group when
// several ask for it. The daemon implements it by calling the group's plugin
// with message groups as items and the live members as consumers. Like
// Directory, it must answer from memory and deterministically, and must not
// modify live. Returning "" or a member not in live means no preference.
type Preference interface {
	Prefer(group string, g MessageGroup, live []string) string
}

// PreferenceFunc adapts a function to Preference.
type PreferenceFunc func(group string, g MessageGroup, live []string) string

// Prefer returns f(group, g, live).
func (f PreferenceFunc) Prefer(group string, g MessageGroup, live []string) string {
	return f(group, g, live)
}

// Config configures a Table. Zero durations mean the defaults.
type Config struct {
	// Directory is required.
	Directory Directory
	// Preference may be nil: then a free message group goes to whichever
	// live member asks first.
	Preference Preference
	// Patience is how long a refused ask for a message group keeps its
	// place: while the preferred member's ask is younger than Patience, a
	// free group is kept for it. Refusals suggest asking again after at
	// most Patience/2, so that a member following that advice never loses
	// its place. Default DefaultPatience.
	Patience time.Duration
	// IdleTTL is how long a free message group's failed-attempt count is
	// kept when nobody asks for it (RocketMQ forgets FIFO state after
	// 24 h). Default DefaultIdleTTL.
	IdleTTL time.Duration
}

// Table holds every lock of every orderly group. It is a pure state machine:
// it never reads the clock, sleeps, starts goroutines or does I/O; each call
// takes the time as now. It is not safe for concurrent use: the daemon must
// serialise calls.
type Table struct {
	dir      Directory
	pref     Preference
	patience time.Duration
	idleTTL  time.Duration

	// clock is the latest now seen. Time never runs backwards inside the
	// Table, so a wall-clock step back (or a restart on a host whose clock
	// is behind) lengthens leases rather than shortening them.
	clock     time.Time
	lastToken uint64 // tokens come from one counter, so they grow per lock
	version   uint64
	groups    map[string]map[Lock]*entry
}

// entry is one lock's state. An entry exists while the lock is held, while a
// message group has failed attempts to remember, or while refused asks for it
// are fresh; otherwise it is deleted, so message groups (unbounded in number)
// cost nothing once idle.
type entry struct {
	holder  string
	token   uint64
	expires time.Time
	// failures counts failed attempts at a message group's head message
	// since its last Done.
	failures int
	// idleSince is when the lock last became free; it ages failures out.
	idleSince time.Time
	// asks records, per member, when it last asked for this message group
	// and was refused. It is soft state: lost on restart, which costs at
	// most one grant going to a member other than the preferred one.
	asks map[string]time.Time
}

// New returns an empty Table. Restore a snapshot into it before serving if
// the daemon ran before.
func New(cfg Config) (*Table, error) {
	if cfg.Directory == nil {
		return nil, &ArgError{Arg: "config", Value: "Directory", Problem: "nil"}
	}
	if cfg.Patience < 0 {
		return nil, &ArgError{Arg: "config", Value: "Patience " + cfg.Patience.String(), Problem: "negative"}
	}
	if cfg.IdleTTL < 0 {
		return nil, &ArgError{Arg: "config", Value: "IdleTTL " + cfg.IdleTTL.String(), Problem: "negative"}
	}
	t := &Table{
		dir:      cfg.Directory,
		pref:     cfg.Preference,
		patience: cmp.Or(cfg.Patience, DefaultPatience),
		idleTTL:  cmp.Or(cfg.IdleTTL, DefaultIdleTTL),
		groups:   make(map[string]map[Lock]*entry),
	}
	return t, nil
}

// Version counts changes to the state that Snapshot captures. The daemon must
// make a Snapshot durable before it answers any call after which Version has
// changed; calls that leave it unchanged (refusals, Check) need no write.
func (t *Table) Version() uint64 { return t.version }

// LockQueues grants, or renews, the locks of queues in a queue-based group to
// cid, for lease (zero means DefaultLease). A queue is granted only to the
// member the current generation assigns it to (Directory.Owner), and only
// when no other member's lease on it is live: after a rebalance moves a queue,
// its new owner is refused with ReasonHeld until the old holder unlocks, its
// lease ends, or it leaves. A holder renews by calling again: the token stays
// and the lease restarts at now. A holder no longer assigned the queue is
// refused the renewal (ReasonNotOwner) and keeps only what is left of its
// lease, so a handover waits at most one lease.
//
// Results come in the order of queues; a queue named twice counts once. The
// call fails as a whole, changing nothing, if any argument is invalid.
func (t *Table) LockQueues(now time.Time, group, cid string, queues []Queue, lease time.Duration) (locked []Grant, refused []Refusal, err error) {
	if err := checkNames(group, cid); err != nil {
		return nil, nil, err
	}
	if lease, err = checkLease(lease); err != nil {
		return nil, nil, err
	}
	for _, q := range queues {
		if err := q.validate(); err != nil {
			return nil, nil, err
		}
	}
	if _, err := t.orderly(group, KindQueue); err != nil {
		return nil, nil, err
	}
	if _, err := t.member(group, cid); err != nil {
		return nil, nil, err
	}
	now = t.advance(now)
	locked = make([]Grant, 0, len(queues))
	for i, q := range queues {
		if slices.Contains(queues[:i], q) {
			continue
		}
		l := QueueLock(q)
		owner := t.dir.Owner(group, q)
		e := t.lookup(group, l)
		if e != nil {
			t.settle(now, l, e)
		}
		switch {
		case e != nil && e.holder == cid && owner != cid:
			refused = append(refused, Refusal{Lock: l, Holder: cid, Reason: ReasonNotOwner, Owner: owner})
		case e != nil && e.holder == cid:
			e.expires = now.Add(lease)
			t.version++
			g := grantOf(l, e, 0)
			g.Renewed = true
			locked = append(locked, g)
		case owner != cid:
			r := Refusal{Lock: l, Reason: ReasonNotOwner, Owner: owner}
			if e != nil {
				r.Holder = e.holder
			}
			refused = append(refused, r)
		case e != nil && e.holder != "":
			refused = append(refused, Refusal{Lock: l, Holder: e.holder, Reason: ReasonHeld, RetryAfter: t.retryAfter(now, e)})
		default:
			e = t.ensure(group, l)
			t.grant(now, e, cid, lease)
			locked = append(locked, grantOf(l, e, 0))
		}
		if e != nil {
			t.tidy(now, group, l, e)
		}
	}
	return locked, refused, nil
}

// UnlockQueues releases those of queues that cid holds in group and returns
// them. Queues it does not hold are left alone: an old holder's late unlock
// cannot free a lock that has since been granted to someone else.
func (t *Table) UnlockQueues(now time.Time, group, cid string, queues []Queue) (unlocked []Queue, err error) {
	if err := checkNames(group, cid); err != nil {
		return nil, err
	}
	for _, q := range queues {
		if err := q.validate(); err != nil {
			return nil, err
		}
	}
	now = t.advance(now)
	for i, q := range queues {
		if slices.Contains(queues[:i], q) {
			continue
		}
		l := QueueLock(q)
		e := t.lookup(group, l)
		if e == nil {
			continue
		}
		t.settle(now, l, e)
		if e.holder == cid {
			t.free(now, l, e, false)
			unlocked = append(unlocked, q)
		}
		t.tidy(now, group, l, e)
	}
	return unlocked, nil
}

// LockMessageGroup grants, or renews, the lock of message group g in a
// message-based group to cid, for lease (zero means DefaultLease). Exactly one
// of the Grant and the *Refusal is meaningful: the Refusal is nil on success.
//
// Any live member may take a free message group, with one exception that
// lets the group's plugin steer ownership without anyone blocking: when
// members were refused the group while it was held, and the one the plugin
// prefers among the live members asked within Patience, the freed group is
// kept for that member and others are refused with ReasonReserved. The
// reservation lasts only as long as the preferred member keeps asking, so a
// free group is never withheld for more than Patience from a member that
// asks for it: no message group starves. The holder renews by calling again
// (same token, same attempt, lease restarts at now); the plugin is never
// asked to take a group away from its holder.
func (t *Table) LockMessageGroup(now time.Time, group, cid string, g MessageGroup, lease time.Duration) (Grant, *Refusal, error) {
	if err := checkNames(group, cid); err != nil {
		return Grant{}, nil, err
	}
	lease, err := checkLease(lease)
	if err != nil {
		return Grant{}, nil, err
	}
	if err := g.validate(); err != nil {
		return Grant{}, nil, err
	}
	cfg, err := t.orderly(group, KindMessageGroup)
	if err != nil {
		return Grant{}, nil, err
	}
	live, err := t.member(group, cid)
	if err != nil {
		return Grant{}, nil, err
	}
	now = t.advance(now)
	l := MessageGroupLock(g)
	e := t.ensure(group, l)
	defer t.tidy(now, group, l, e)
	t.settle(now, l, e)
	switch {
	case e.holder == cid:
		e.expires = now.Add(lease)
		t.version++
		g := grantOf(l, e, cfg.maxAttempts())
		g.Renewed = true
		return g, nil, nil
	case e.holder != "":
		t.ask(now, e, cid)
		return Grant{}, &Refusal{Lock: l, Holder: e.holder, Reason: ReasonHeld, RetryAfter: t.retryAfter(now, e)}, nil
	}
	if p, until := t.reserved(now, group, g, e, cid, live); p != "" {
		t.ask(now, e, cid)
		return Grant{}, &Refusal{Lock: l, Reason: ReasonReserved, Owner: p, RetryAfter: until.Sub(now)}, nil
	}
	t.grant(now, e, cid, lease)
	return grantOf(l, e, cfg.maxAttempts()), nil, nil
}

// reserved returns the member a free message group is kept for, and until
// when, or "" if cid may take it. The plugin is asked only when another live
// member is waiting, which keeps plugin calls off the uncontended path.
func (t *Table) reserved(now time.Time, group string, g MessageGroup, e *entry, cid string, live []string) (string, time.Time) {
	if t.pref == nil {
		return "", time.Time{}
	}
	waiting := false
	for m, at := range e.asks {
		if m != cid && t.fresh(now, at) && slices.Contains(live, m) {
			waiting = true
			break
		}
	}
	if !waiting {
		return "", time.Time{}
	}
	p := t.pref.Prefer(group, g, live)
	if p == "" || p == cid || !slices.Contains(live, p) {
		return "", time.Time{}
	}
	at, ok := e.asks[p]
	if !ok || !t.fresh(now, at) {
		return "", time.Time{}
	}
	return p, at.Add(t.patience)
}

// ReleaseMessageGroup ends cid's hold on message group g. token must be the
// token of cid's live grant; otherwise the call is refused with a
// *StaleError and changes nothing, so a holder whose lease ran out cannot
// release (or reset the attempts of) a grant that is no longer its own.
// Outcome Done resets the group's attempt count; Retry counts a failed
// attempt.
func (t *Table) ReleaseMessageGroup(now time.Time, group, cid string, g MessageGroup, token uint64, outcome Outcome) error {
	if err := checkNames(group, cid); err != nil {
		return err
	}
	if err := g.validate(); err != nil {
		return err
	}
	if outcome != Done && outcome != Retry {
		return &ArgError{Arg: "outcome", Value: outcome.String(), Problem: "unknown outcome (want done or retry)"}
	}
	now = t.advance(now)
	l := MessageGroupLock(g)
	e := t.lookup(group, l)
	if e == nil {
		return &StaleError{Group: group, Lock: l, Token: token, CID: cid}
	}
	defer t.tidy(now, group, l, e)
	t.settle(now, l, e)
	if e.holder != cid || e.token != token {
		return &StaleError{Group: group, Lock: l, Token: token, CID: cid, Holder: e.holder, Current: e.token}
	}
	t.free(now, l, e, outcome == Retry)
	if outcome == Done {
		e.failures = 0
	}
	return nil
}

// Check reports whether token still holds lock l in group: it returns nil if
// so, a *StaleError if not, and an *ArgError for a malformed l or group. A
// broker or offset store calls it (through the daemon) to refuse a stale
// holder's commit. It changes nothing but the clock (see advance), so it needs
// no write.
func (t *Table) Check(now time.Time, group string, l Lock, token uint64) error {
	if group == "" {
		return &ArgError{Arg: "group", Value: `""`, Problem: "empty"}
	}
	if err := l.validate(); err != nil {
		return err
	}
	now = t.advance(now)
	var holder string
	var current uint64
	if e := t.lookup(group, l); e != nil && e.holder != "" && now.Before(e.expires) {
		holder, current = e.holder, e.token
	}
	if holder != "" && current == token {
		return nil
	}
	return &StaleError{Group: group, Lock: l, Token: token, Holder: holder, Current: current}
}

// MemberGone releases every lock cid holds in group at once, and returns what
// it released. The daemon calls it when cid leaves or misses its session
// timeout, so that its queues and message groups move on now rather than when
// their leases run out. A message group taken from a departed holder counts a
// failed attempt: its head message was never reported done.
func (t *Table) MemberGone(now time.Time, group, cid string) ([]Lease, error) {
	if err := checkNames(group, cid); err != nil {
		return nil, err
	}
	now = t.advance(now)
	var gone []Lease
	for l, e := range t.groups[group] {
		t.settle(now, l, e)
		if e.holder == cid {
			gone = append(gone, leaseOf(group, l, e))
			t.free(now, l, e, true)
		}
		delete(e.asks, cid)
		t.tidy(now, group, l, e)
	}
	sortLeases(gone)
	return gone, nil
}

// Tick ends the leases that have run out by now and returns them, and forgets
// the attempt counts of message groups idle for IdleTTL. Every call already
// treats a lease as ended once now reaches its expiry, so Tick is not needed
// for safety; the daemon calls it every few seconds to report expiries and
// bound memory.
func (t *Table) Tick(now time.Time) []Lease {
	now = t.advance(now)
	var expired []Lease
	for group, locks := range t.groups {
		for l, e := range locks {
			if e.holder != "" && !now.Before(e.expires) {
				expired = append(expired, leaseOf(group, l, e))
				t.free(now, l, e, true)
			}
			if e.holder == "" && e.failures > 0 && !now.Before(e.idleSince.Add(t.idleTTL)) {
				e.failures = 0
				t.version++
			}
			t.tidy(now, group, l, e)
		}
	}
	sortLeases(expired)
	return expired
}

// Leases returns the live leases of group, or of every group if group is
// empty, sorted by group and lock. Like Check, it changes only the clock.
func (t *Table) Leases(now time.Time, group string) []Lease {
	now = t.advance(now)
	var out []Lease
	for g, locks := range t.groups {
		if group != "" && g != group {
			continue
		}
		for l, e := range locks {
			if e.holder != "" && now.Before(e.expires) {
				out = append(out, leaseOf(g, l, e))
			}
		}
	}
	sortLeases(out)
	return out
}

// checkNames validates the names every member call carries.
func checkNames(group, cid string) error {
	if group == "" {
		return &ArgError{Arg: "group", Value: `""`, Problem: "empty"}
	}
	if cid == "" {
		return &ArgError{Arg: "cid", Value: `""`, Problem: "empty"}
	}
	return nil
}

// checkLease validates a requested lease and resolves zero to DefaultLease.
func checkLease(lease time.Duration) (time.Duration, error) {
	if lease == 0 {
		return DefaultLease, nil
	}
	if lease < MinLease || lease > MaxLease {
		return 0, &LeaseError{Lease: lease, Min: MinLease, Max: MaxLease}
	}
	return lease, nil
}

// orderly returns group's configuration, checking that it takes locks of
// kind want.
func (t *Table) orderly(group string, want Kind) (GroupConfig, error) {
	cfg, ok := t.dir.Group(group)
	switch {
	case !ok:
		return cfg, &GroupError{Group: group, Problem: "not an orderly group"}
	case !cfg.Kind.valid():
		return cfg, &KindError{Group: group, Kind: cfg.Kind}
	case cfg.Kind != want:
		return cfg, &KindError{Group: group, Kind: cfg.Kind, Want: want}
	case cfg.MaxAttempts < 0:
		return cfg, &GroupError{Group: group, Problem: "maxAttempts " + strconv.Itoa(cfg.MaxAttempts) + " is negative"}
	}
	return cfg, nil
}

// member returns group's live members, checking that cid is one of them: a
// member that has left must not take locks even if it still calls.
func (t *Table) member(group, cid string) ([]string, error) {
	live := t.dir.Members(group)
	if !slices.Contains(live, cid) {
		return nil, &MemberError{Group: group, CID: cid}
	}
	return live, nil
}

// advance moves the Table's clock to now, if later, and returns the clock.
// Every call advances it, Check included, so that once a call has seen a
// lease run out no later call sees it live, even if the daemon's clock steps
// back. The monotonic reading is dropped: leases are persisted as wall-clock
// times and must compare the same way before and after a restart.
func (t *Table) advance(now time.Time) time.Time {
	now = now.Round(0).UTC()
	if now.After(t.clock) {
		t.clock = now
	}
	return t.clock
}

func (t *Table) lookup(group string, l Lock) *entry {
	return t.groups[group][l]
}

func (t *Table) ensure(group string, l Lock) *entry {
	locks := t.groups[group]
	if locks == nil {
		locks = make(map[Lock]*entry)
		t.groups[group] = locks
	}
	e := locks[l]
	if e == nil {
		e = &entry{}
		locks[l] = e
	}
	return e
}

// settle ends e's lease if it has run out by now. Expiry is evaluated lazily
// by every call, so correctness never depends on when Tick runs.
func (t *Table) settle(now time.Time, l Lock, e *entry) {
	if e.holder != "" && !now.Before(e.expires) {
		t.free(now, l, e, true)
	}
}

// grant gives e to cid with a new token.
func (t *Table) grant(now time.Time, e *entry, cid string, lease time.Duration) {
	t.lastToken++
	e.holder = cid
	e.token = t.lastToken
	e.expires = now.Add(lease)
	e.idleSince = time.Time{}
	delete(e.asks, cid)
	t.version++
}

// free ends e's lease; failed counts a failed attempt on a message group.
func (t *Table) free(now time.Time, l Lock, e *entry, failed bool) {
	e.holder, e.token, e.expires = "", 0, time.Time{}
	if failed && l.Kind == KindMessageGroup {
		e.failures++
	}
	e.idleSince = now
	t.version++
}

func (t *Table) ask(now time.Time, e *entry, cid string) {
	if e.asks == nil {
		e.asks = make(map[string]time.Time)
	}
	e.asks[cid] = now
}

func (t *Table) fresh(now, at time.Time) bool { return now.Before(at.Add(t.patience)) }

// retryAfter suggests when to ask again for a held lock: when its lease runs
// out, but no later than Patience/2, because holders usually release long
// before that and a waiting member must re-ask within Patience to keep its
// place.
func (t *Table) retryAfter(now time.Time, e *entry) time.Duration {
	return min(e.expires.Sub(now), t.patience/2)
}

// tidy drops stale asks and deletes e when it holds nothing worth keeping.
// Deleting a free entry without failures changes nothing Snapshot captures.
func (t *Table) tidy(now time.Time, group string, l Lock, e *entry) {
	for m, at := range e.asks {
		if !t.fresh(now, at) {
			delete(e.asks, m)
		}
	}
	if e.holder != "" || e.failures > 0 || len(e.asks) > 0 {
		return
	}
	locks := t.groups[group]
	delete(locks, l)
	if len(locks) == 0 {
		delete(t.groups, group)
	}
}

func grantOf(l Lock, e *entry, maxAttempts int) Grant {
	g := Grant{Lock: l, Token: e.token, Expires: e.expires}
	if l.Kind == KindMessageGroup {
		g.Attempt = e.failures + 1
		g.DeadLetter = e.failures >= maxAttempts
	}
	return g
}

func leaseOf(group string, l Lock, e *entry) Lease {
	ls := Lease{Group: group, Lock: l, Holder: e.holder, Token: e.token, Expires: e.expires}
	if l.Kind == KindMessageGroup {
		ls.Attempt = e.failures + 1
	}
	return ls
}

func sortLeases(ls []Lease) {
	slices.SortFunc(ls, func(a, b Lease) int {
		if c := cmp.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return compareLocks(a.Lock, b.Lock)
	})
}
