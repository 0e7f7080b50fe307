package ha

import (
	"sync"
	"time"
)

// Clock tells the time. The daemon uses SystemClock; tests move a fake one.
type Clock interface{ Now() time.Time }

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Deadline is a leader's own bound on its leadership: the time at which etcd may have let its
// session lease go, less a margin. It is computed from the time each keep-alive was sent, not
// the time its answer came back, because etcd restarts the lease's TTL when it receives the
// request, which is after it was sent: so the lease is alive at least until sent + TTL, and a
// replica that stops serving at sent + TTL - margin never overlaps the next leader, which can
// win only once the lease is gone. A leader paused (SIGSTOP, a long GC, a frozen VM) finds its
// deadline passed when it wakes and serves nothing: Valid compares with the clock at the time of
// the call, and no timer has to fire first.
//
// The zero Deadline is invalid. It is safe for concurrent use.
type Deadline struct {
	margin time.Duration

	mu    sync.Mutex
	until time.Time // zero: not renewed since the last Clear
}

// NewDeadline returns an invalid Deadline that keeps margin below each lease's end.
func NewDeadline(margin time.Duration) *Deadline { return &Deadline{margin: margin} }

// Renewed records a keep-alive sent at sent and answered with a lease TTL of ttl. It only ever
// moves the deadline later: an answer that arrives out of order cannot shorten it below what a
// later keep-alive already proved, and cannot extend it past what its own send time proves.
func (d *Deadline) Renewed(sent time.Time, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	until := sent.Add(ttl - d.margin)
	d.mu.Lock()
	if until.After(d.until) {
		d.until = until
	}
	d.mu.Unlock()
}

// Clear makes the deadline invalid until the next Renewed: the lease is gone.
func (d *Deadline) Clear() {
	d.mu.Lock()
	d.until = time.Time{}
	d.mu.Unlock()
}

// Until is the deadline; zero when cleared.
func (d *Deadline) Until() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.until
}

// Valid reports whether now is before the deadline.
func (d *Deadline) Valid(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.until.IsZero() && now.Before(d.until)
}

// Margin is how far below a lease's end the deadline is kept.
func (d *Deadline) Margin() time.Duration { return d.margin }

// DefaultMargin is the margin for a session TTL: a quarter of it, at least 100 ms. It covers the
// time between a replica's check of its deadline and the moment its answer leaves, and the
// difference in rate between the replica's clock and etcd's.
func DefaultMargin(ttl time.Duration) time.Duration {
	return max(ttl/4, 100*time.Millisecond)
}
