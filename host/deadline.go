package host

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// callCtx is the context an instance runs its guest calls under: the caller's context, the
// instance (which the host functions look up with ctx.Value), and the call's deadline, enforced by
// a timer that the instance keeps from call to call.
//
// Why not context.WithTimeout(context.WithValue(ctx, ...))? Those cost six allocations and about
// 0.5 us a call (BENCHMARKS.md, "Plugin calls"), half of a trivial call. Re-arming a stopped timer
// costs no allocation; a caller whose context can be canceled adds one context.AfterFunc.
//
// wazero watches Done from a goroutine of its own, which may still be waiting after the call
// returned. So done is closed at most once, when the deadline or the caller's cancellation
// fires, and a callCtx that fired is never armed again: the instance takes a fresh one.
type callCtx struct {
	context.Context // the caller's context of the current call

	in         *instance
	timer      *time.Timer
	deadline   time.Time
	stopCaller func() bool // unregisters fire from the caller's context; nil when it has no Done
	done       chan struct{}
	once       sync.Once
	err        atomic.Value // error, set before done is closed
}

func newCallCtx(in *instance) *callCtx {
	c := &callCtx{in: in, done: make(chan struct{})}
	c.timer = time.AfterFunc(time.Hour, func() { c.fire(context.DeadlineExceeded) })
	c.timer.Stop()
	return c
}

// arm starts a call under the caller's ctx, ending at most d from now.
func (c *callCtx) arm(ctx context.Context, d time.Duration) {
	c.Context = ctx
	c.deadline = time.Now().Add(d)
	if ctx.Done() != nil {
		c.stopCaller = context.AfterFunc(ctx, func() { c.fire(ctx.Err()) })
	}
	c.timer.Reset(d)
}

// disarm ends the call. It reports whether c may serve another call: false when the deadline or
// the caller's cancellation fired, or may still fire.
func (c *callCtx) disarm() bool {
	ok := c.timer.Stop()
	if c.stopCaller != nil {
		if !c.stopCaller() {
			ok = false
		}
		c.stopCaller = nil
	}
	return ok && c.Err() == nil
}

func (c *callCtx) fire(err error) {
	c.once.Do(func() {
		c.err.Store(err)
		// An instrumented guest traps at its next call into the host (loopcheck).
		c.in.stop.Store(true)
		close(c.done)
	})
}

func (c *callCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *callCtx) Done() <-chan struct{} { return c.done }

func (c *callCtx) Err() error {
	if err, ok := c.err.Load().(error); ok {
		return err
	}
	return nil
}

func (c *callCtx) Value(key any) any {
	if key == (instKey{}) {
		return c.in
	}
	return c.Context.Value(key)
}
