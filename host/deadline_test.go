package host_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/wasmbuild"
)

// TestCallerCancelStopsGuest: a caller that gives up stops a looping guest long before the
// plugin's own deadline, and the error says the caller gave up, not that the plugin timed out.
func TestCallerCancelStopsGuest(t *testing.T) {
	rt := newRuntime(t, host.Config{Timeout: time.Minute})
	p := load(t, rt, "loop")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Allocate(ctx, &abi.Request{Group: "g", Queues: queues("T", 1, 1), Consumers: []string{"c"}})
	if !host.IsKind(err, host.KindCanceled) {
		t.Fatalf("err = %v, want kind %s", err, host.KindCanceled)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}
}

// TestDeadlinePerCall: the deadline bounds each call, not the life of an instance, whether or
// not the caller's context can be canceled; an instance serves many calls in a row.
func TestDeadlinePerCall(t *testing.T) {
	// A call the scheduler stalls past its deadline is discarded: at 300 ms one was, in a CI
	// run whose 2 CPUs other tests kept busy, and a load's _initialize runs under the same
	// deadline (TestDeadlineErrorsMatchDeadlineExceeded). Two seconds is far from either.
	const timeout = 2 * time.Second
	// RecycleAfter out of reach: a fast machine makes some 300,000 calls a second below.
	rt := newRuntime(t, host.Config{Timeout: timeout, MaxInstances: 1, RecycleAfter: math.MaxInt})
	p := load(t, rt, "first")
	cancelable, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := &abi.Request{Group: "g", Queues: queues("T", 1, 4), Consumers: []string{"c1", "c2"}}
	start := time.Now()
	for i := 0; time.Since(start) < timeout+time.Second; i++ { // longer than one deadline
		ctx := context.Background()
		if i%2 == 1 {
			ctx = cancelable
		}
		if _, err := p.Allocate(ctx, req); err != nil {
			t.Fatalf("call %d after %v: %v", i, time.Since(start), err)
		}
	}
	if s := p.Stats(); s.Discarded != 0 || s.Created != 0 {
		t.Fatalf("stats = %+v: the one instance should have served every call", s)
	}
	// A timeout still stops a looping guest, and the next call gets a working instance.
	loop := load(t, rt, "loop")
	if _, err := loop.Allocate(context.Background(), req); !host.IsKind(err, host.KindTimeout) {
		t.Fatalf("loop: err = %v, want kind %s", err, host.KindTimeout)
	}
	if _, err := p.Allocate(cancelable, req); err != nil {
		t.Fatal(err)
	}
}

// TestRandomRestartsPerCall: every call of an instance sees the same random bytes, whether or not
// the calls before it read any (the host reseeds only a stream that was read).
func TestRandomRestartsPerCall(t *testing.T) {
	rt := newRuntime(t, host.Config{MaxInstances: 1})
	p := load(t, rt, "random")
	ctx := context.Background()
	draw := func() string {
		t.Helper()
		var got string
		if err := p.CallExport(ctx, "allocate", nil, func(out []byte) error { got = string(out); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 16 {
			t.Fatalf("drew %d bytes", len(got))
		}
		return got
	}
	first := draw()
	for i, quiet := range []int{0, 1, 3, 0} {
		for range quiet {
			if err := p.CallExport(ctx, "quiet", nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		if got := draw(); got != first {
			t.Fatalf("draw %d after %d quiet calls: %x, want %x", i+1, quiet, got, first)
		}
	}
	if s := p.Stats(); s.Created != 0 || s.Discarded != 0 {
		t.Fatalf("stats = %+v: one instance should have served every call", s)
	}
}

// TestVirtualClock: a guest's clocks are virtual. The wall clock reads 2022, whatever the date,
// and a one-hour sleep returns at once (well inside the call's deadline) having moved the
// monotonic clock forward by the hour.
func TestVirtualClock(t *testing.T) {
	rt := newRuntime(t, host.Config{Timeout: 5 * time.Second})
	p := load(t, rt, "clock")
	var got string
	if err := p.CallExport(context.Background(), "allocate", nil, func(out []byte) error { got = string(out); return nil }); err != nil {
		t.Fatal(err)
	}
	year, elapsed, ok := strings.Cut(got, " ")
	ns, err := strconv.ParseInt(elapsed, 10, 64)
	if !ok || err != nil || year != "2022" {
		t.Fatalf("guest saw %q, want the year 2022 and the nanoseconds a sleep took", got)
	}
	// The sleep, plus the clock's step for each reading the Go runtime makes around it.
	if d := time.Duration(ns); d < time.Hour || d > time.Hour+time.Second {
		t.Fatalf("a one-hour sleep took %v of guest time, want an hour and a little", d)
	}
}

// TestDeadlineErrorsMatchDeadlineExceeded: a failure of time (a call or an _initialize stopped
// at the host's deadline) matches context.DeadlineExceeded, so that a caller can try it again
// later; a failure of the plugin's code, or a caller that gave up, does not.
func TestDeadlineErrorsMatchDeadlineExceeded(t *testing.T) {
	// The deadline bounds a plugin's _initialize at load too: at 300 ms a CI run whose 2 CPUs
	// other tests kept busy stopped the loop plugin's (a Go runtime's start, under the race
	// detector) before its call was reached. Two seconds is far from any load's time.
	rt := newRuntime(t, host.Config{Timeout: 2 * time.Second})
	req := &abi.Request{Group: "g", Queues: queues("T", 1, 1), Consumers: []string{"c"}}
	_, err := load(t, rt, "loop").Allocate(context.Background(), req)
	if !host.IsKind(err, host.KindTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("loop: err = %v (kind timeout %v), want a timeout matching context.DeadlineExceeded", err, host.IsKind(err, host.KindTimeout))
	}
	if !strings.Contains(err.Error(), "stopped after the 2s deadline") {
		t.Fatalf("loop: err = %v, want it to name the deadline", err)
	}
	if _, err := load(t, rt, "trap").Allocate(context.Background(), req); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("trap: err = %v, want a failure that is not a deadline's", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := load(t, newRuntime(t, host.Config{Timeout: time.Minute}), "loop").Allocate(ctx, req); !host.IsKind(err, host.KindCanceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("canceled: err = %v, want kind canceled, not a deadline", err)
	}

	// A Go guest's _initialize (its runtime and package init) takes far more than a microsecond.
	tiny := newRuntime(t, host.Config{Timeout: time.Microsecond})
	_, err = tiny.Load(context.Background(), "first", wasmbuild.Bytes(t, "host/testdata/plugins/first"))
	if !host.IsKind(err, host.KindLoad) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "_initialize") {
		t.Fatalf("load under a 1µs deadline: err = %v, want a load error naming _initialize and matching context.DeadlineExceeded", err)
	}
}
