package lock

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Snapshot is the Table's durable state, as plain JSON-tagged values. It
// holds every live lease (so that a restarted daemon grants nothing that
// overlaps a lease granted before it stopped), the last token issued (so
// that tokens keep growing across restarts), and the attempt counts of free
// message groups. Refused asks are not part of it: see entry.asks.
type Snapshot struct {
	// Clock is the latest time the Table had seen. A restored Table never
	// runs its clock behind it.
	Clock     time.Time   `json:"clock"`
	LastToken uint64      `json:"lastToken"`
	Locks     []LockState `json:"locks"`
}

// LockState is one lock in a Snapshot: held (Holder, Token, Expires set),
// or free with failed attempts to remember (Failures, IdleSince set).
type LockState struct {
	Group     string    `json:"group"`
	Lock      Lock      `json:"lock"`
	Holder    string    `json:"holder,omitempty"`
	Token     uint64    `json:"token,omitempty"`
	Expires   time.Time `json:"expires,omitzero"`
	Failures  int       `json:"failures,omitempty"`
	IdleSince time.Time `json:"idleSince,omitzero"`
}

// Snapshot returns the Table's durable state, sorted by group and lock so
// that equal states encode to equal bytes. Leases that have run out but that
// no call has yet ended are included as they are: restoring them is safe,
// since every call ends them by time.
func (t *Table) Snapshot() Snapshot {
	n := 0
	for _, locks := range t.groups {
		n += len(locks)
	}
	s := Snapshot{Clock: t.clock, LastToken: t.lastToken, Locks: make([]LockState, 0, n)}
	for group, locks := range t.groups {
		for l, e := range locks {
			if e.holder == "" && e.failures == 0 {
				continue
			}
			s.Locks = append(s.Locks, LockState{
				Group: group, Lock: l,
				Holder: e.holder, Token: e.token, Expires: e.expires,
				Failures: e.failures, IdleSince: e.idleSince,
			})
		}
	}
	slices.SortFunc(s.Locks, func(a, b LockState) int {
		if c := cmp.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return compareLocks(a.Lock, b.Lock)
	})
	return s
}

// Restore replaces the Table's locks with those of s, after checking all of
// s; on error the Table is unchanged. The clock and the token counter only
// move forward: restoring an older snapshot into a Table that has issued
// tokens since must not let it issue them again.
func (t *Table) Restore(s Snapshot) error {
	groups := make(map[string]map[Lock]*entry)
	tokens := make(map[uint64]bool)
	for i, ls := range s.Locks {
		bad := func(format string, args ...any) error {
			return &ArgError{
				Arg:     "snapshot",
				Value:   "locks[" + strconv.Itoa(i) + "] (" + ls.Lock.String() + " in group " + strconv.Quote(ls.Group) + ")",
				Problem: fmt.Sprintf(format, args...),
			}
		}
		if err := ls.Lock.validate(); err != nil {
			var ae *ArgError
			if errors.As(err, &ae) {
				return bad("%s", ae.Problem)
			}
			return bad("%v", err)
		}
		held := ls.Holder != ""
		switch {
		case ls.Group == "":
			return bad("empty group")
		case groups[ls.Group][ls.Lock] != nil:
			return bad("lock appears twice")
		case held != (ls.Token != 0) || held != !ls.Expires.IsZero():
			return bad("holder %q, token %d and expires %v must be all set or all unset", ls.Holder, ls.Token, ls.Expires)
		case ls.Token > s.LastToken:
			return bad("token %d is above lastToken %d", ls.Token, s.LastToken)
		case held && tokens[ls.Token]:
			return bad("token %d is held twice", ls.Token)
		case ls.Failures < 0:
			return bad("failures %d is negative", ls.Failures)
		case ls.Failures > 0 && ls.Lock.Kind != KindMessageGroup:
			return bad("failures %d on a queue lock", ls.Failures)
		}
		tokens[ls.Token] = true
		if groups[ls.Group] == nil {
			groups[ls.Group] = make(map[Lock]*entry)
		}
		groups[ls.Group][ls.Lock] = &entry{
			holder: ls.Holder, token: ls.Token, expires: ls.Expires.Round(0).UTC(),
			failures: ls.Failures, idleSince: ls.IdleSince.Round(0).UTC(),
		}
	}
	t.groups = groups
	t.lastToken = max(t.lastToken, s.LastToken)
	t.advance(s.Clock)
	t.version++
	return nil
}
