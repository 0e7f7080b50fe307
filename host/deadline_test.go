package host_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
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
	const timeout = 300 * time.Millisecond
	// RecycleAfter out of reach: a fast machine makes some 300,000 calls in the loop below.
	rt := newRuntime(t, host.Config{Timeout: timeout, MaxInstances: 1, RecycleAfter: math.MaxInt})
	p := load(t, rt, "first")
	cancelable, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := &abi.Request{Group: "g", Queues: queues("T", 1, 4), Consumers: []string{"c1", "c2"}}
	start := time.Now()
	for i := 0; time.Since(start) < 3*timeout; i++ {
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
