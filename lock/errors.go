package lock

import (
	"strconv"
	"time"
)

// The error types below let the daemon tell a caller's mistake (ArgError,
// LeaseError: answer 400), a group that cannot take this lock (GroupError,
// KindError), a caller that is not a member (MemberError) and a fenced-off
// holder (StaleError) apart with errors.As. Each names the value at fault.

// ArgError reports a malformed argument.
type ArgError struct {
	Arg     string // "cid", "group", "queue", "message group", "outcome", ...
	Value   string // the value as given, quoted when it is a plain string
	Problem string
}

func (e *ArgError) Error() string {
	return "lock: invalid " + e.Arg + " " + e.Value + ": " + e.Problem
}

// LeaseError reports a requested lease outside [Min, Max].
type LeaseError struct {
	Lease, Min, Max time.Duration
}

func (e *LeaseError) Error() string {
	return "lock: lease " + e.Lease.String() + " out of range [" + e.Min.String() + ", " + e.Max.String() + "]"
}

// GroupError reports a group that the Directory does not know as an orderly
// group, or whose configuration is unusable.
type GroupError struct {
	Group   string
	Problem string
}

func (e *GroupError) Error() string {
	return "lock: group " + strconv.Quote(e.Group) + ": " + e.Problem
}

// KindError reports a group whose kind is unknown (Want is zero), or that
// uses the other kind of lock than the one asked for.
type KindError struct {
	Group string
	Kind  Kind // the group's kind
	Want  Kind // the kind the call needs; zero when Kind itself is unknown
}

func (e *KindError) Error() string {
	if e.Want == 0 {
		return "lock: group " + strconv.Quote(e.Group) + " has unknown kind " + e.Kind.String()
	}
	return "lock: group " + strconv.Quote(e.Group) + " takes " + kindPhrase(e.Kind) + " locks, not " + kindPhrase(e.Want) + " locks"
}

func kindPhrase(k Kind) string {
	if k == KindMessageGroup {
		return "message-group"
	}
	return k.String()
}

// MemberError reports a caller that is not a live member of the group.
type MemberError struct {
	Group string
	CID   string
}

func (e *MemberError) Error() string {
	return "lock: " + strconv.Quote(e.CID) + " is not a live member of group " + strconv.Quote(e.Group)
}

// StaleError reports a token that no longer holds its lock (the lease ended,
// was released, or was granted again with a larger token), or that is not the
// caller's.
type StaleError struct {
	Group string
	Lock  Lock
	Token uint64
	// CID is the member that presented the token; empty for Check.
	CID string
	// Holder and Current describe the live grant now, if any: its holder
	// and its token. Holder is empty when the lock is free.
	Holder  string
	Current uint64
}

func (e *StaleError) Error() string {
	s := "lock: token " + strconv.FormatUint(e.Token, 10) + " for " + e.Lock.String() +
		" in group " + strconv.Quote(e.Group) + " is stale: "
	switch {
	case e.Holder == "":
		return s + "the lock is free"
	case e.Token == e.Current && e.CID != "" && e.CID != e.Holder:
		return "lock: token " + strconv.FormatUint(e.Token, 10) + " for " + e.Lock.String() +
			" in group " + strconv.Quote(e.Group) + " is held by " + e.Holder + ", not " + e.CID
	}
	return s + "held by " + e.Holder + " with token " + strconv.FormatUint(e.Current, 10)
}
