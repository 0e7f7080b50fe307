package host

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// instance is one instantiated module. It serves one call at a time.
type instance struct {
	p        *Plugin
	mod      api.Module
	allocate api.Function
	describe api.Function // nil when the plugin does not describe itself
	version  api.Function
	stack    []uint64
	stderr   *headBuffer
	cc       *callCtx // the context of the next call; see deadline.go
	// stop, once set, makes the running call trap the next time an instrumented module calls
	// into the host through sched_yield (every loopcheck.Period loop heads; see yield).
	stop atomic.Bool
	// interruptible: the module was instrumented by loopcheck (stop works), rather than run
	// under wazero's own checks.
	interruptible bool
	// tainted: a call ended while its deadline fired, so the interrupt may be set; the
	// instance is discarded rather than pooled.
	tainted bool
	random  *random
	clock   clock
	calls   int
	memory  int64 // linear memory bytes, as counted in the plugin's stats

	// Per-call state, reset by begin.
	input  []byte
	output []byte
	errMsg string
	errSet bool
	config map[string]string
	vars   map[string][]byte
	varLen int
	// arena is the Extism host memory: blocks are bump-allocated, 8-aligned, never at offset
	// 0 (which means "none"), and all freed at once before the next call, because go-pdk never
	// frees the blocks of Output, SetError and Log.
	arena  []byte
	blocks []block
}

type block struct{ off, len uint64 }

const maxVars = 1 << 20

func (p *Plugin) newInstance(ctx context.Context) (*instance, error) {
	in := &instance{p: p, stack: make([]uint64, 1), stderr: newHeadBuffer(MaxErrorStderr), vars: map[string][]byte{}, random: newRandom(), interruptible: p.interruptible}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(). // _initialize is called below, under a deadline
		WithStderr(in.stderr).
		WithStdout(in.stderr).
		// A fixed seed: every instance sees the same "random" bytes, so answers do not depend on
		// which pooled instance served them.
		WithRandSource(in.random).
		// loopcheck makes a guest call sched_yield every loopcheck.Period loop heads: the point
		// where a runaway call is stopped, and where Go's scheduler and collector get in.
		WithOsyield(in.yield).
		WithNanotime(in.clock.nanotime, 1).
		WithWalltime(in.clock.walltime, 1).
		WithNanosleep(in.clock.sleep)
	mod, err := p.wr.InstantiateModule(context.WithValue(ctx, instKey{}, in), p.compiled, cfg)
	if err != nil {
		return nil, &Error{Plugin: p.name, Kind: KindLoad, Err: fmt.Errorf("instantiate: %w", err), Stderr: in.stderr.String()}
	}
	in.mod = mod
	if init := mod.ExportedFunction("_initialize"); init != nil {
		// Under the call deadline, like any call: a package init that never ends fails the
		// load instead of hanging it.
		if _, err := in.invoke(ctx, init, nil, nil); err != nil {
			mod.Close(ctx)
			return nil, &Error{Plugin: p.name, Kind: KindLoad, Err: fmt.Errorf("_initialize: %w", err), Stderr: in.stderr.String()}
		}
		in.calls = 0
		if in.tainted {
			mod.Close(ctx)
			return nil, &Error{Plugin: p.name, Kind: KindLoad, Err: &deadlineError{"_initialize ended at its", p.rt.cfg.Timeout}}
		}
	}
	// Look exports up once: ExportedFunction costs microseconds and kilobytes per lookup.
	in.allocate = mod.ExportedFunction("allocate")
	in.version = mod.ExportedFunction("allocd_abi_version")
	in.describe = mod.ExportedFunction("allocd_describe")
	p.stats.instances.Add(1)
	in.measureMemory()
	return in, nil
}

func (in *instance) close(ctx context.Context) {
	in.mod.Close(ctx)
	in.p.stats.instances.Add(-1)
	in.p.stats.memory.Add(-in.memory)
}

// measureMemory brings the plugin's memory count up to date with this instance's linear memory.
func (in *instance) measureMemory() {
	var size int64
	if m := in.mod.Memory(); m != nil {
		size = int64(m.Size())
	}
	in.p.stats.memory.Add(size - in.memory)
	in.memory = size
}

// begin resets the per-call state.
func (in *instance) begin(input []byte, config map[string]string) {
	in.input, in.config = input, config
	in.output = in.output[:0]
	in.errMsg, in.errSet = "", false
	in.arena = in.arena[:0]
	in.blocks = in.blocks[:0]
	if len(in.vars) > 0 {
		// Vars live per instance; cleared per call, pooled instances cannot disagree.
		clear(in.vars)
		in.varLen = 0
	}
	in.stderr.Reset()
	in.random.reset()
}

// call runs fn with input and returns its output. A non-nil error means the instance must not be
// used again, except for a KindFailed error (the plugin reported failure normally).
func (in *instance) call(ctx context.Context, fn api.Function, input []byte, config map[string]string) ([]byte, error) {
	rc, err := in.invoke(ctx, fn, input, config)
	if err != nil {
		return nil, err
	}
	if rc != 0 {
		msg := in.errMsg
		if !in.errSet {
			msg = fmt.Sprintf("returned status %d without an error message", rc)
		}
		return nil, &Error{Plugin: in.p.name, Kind: KindFailed, Err: errors.New(msg)}
	}
	return in.output, nil
}

// invoke runs fn under the call deadline and returns its i32 result.
func (in *instance) invoke(ctx context.Context, fn api.Function, input []byte, config map[string]string) (int32, error) {
	in.begin(input, config)
	in.calls++
	if in.cc == nil {
		in.cc = newCallCtx(in)
	}
	cc := in.cc
	cc.arm(ctx, in.p.rt.cfg.Timeout)
	in.stack[0] = 0
	err := fn.CallWithStack(cc, in.stack)
	fired := cc.Err()
	if !cc.disarm() {
		in.cc = nil // it fired, so its Done stays closed: the next call takes a fresh one
		in.tainted = true
	}
	if err != nil {
		if in.interruptible && fired != nil {
			return 0, in.stopped(ctx, fired)
		}
		return 0, in.failure(ctx, err)
	}
	return int32(in.stack[0]), nil
}

// errStopped is the trap yield raises in a call whose deadline fired or whose caller gave up.
var errStopped = errors.New("stopped by the host")

// yield is the guest's WASI sched_yield.
func (in *instance) yield() {
	if in.stop.Load() {
		panic(errStopped)
	}
}

// stopped reports a call the interrupt stopped: at its deadline, or because the caller gave up.
func (in *instance) stopped(ctx context.Context, why error) error {
	if why == context.DeadlineExceeded && ctx.Err() == nil {
		return &Error{Plugin: in.p.name, Kind: KindTimeout, Err: &deadlineError{"stopped after the", in.p.rt.cfg.Timeout}, Stderr: in.stderr.String()}
	}
	return &Error{Plugin: in.p.name, Kind: KindCanceled, Err: fmt.Errorf("caller gave up: %w", why), Stderr: in.stderr.String()}
}

// failure classifies an error from the guest call.
func (in *instance) failure(ctx context.Context, err error) error {
	var exit *sys.ExitError
	kind := KindTrap
	if errors.As(err, &exit) {
		switch {
		case exit.ExitCode() == sys.ExitCodeDeadlineExceeded && ctx.Err() == nil:
			kind = KindTimeout
			err = &deadlineError{"stopped after the", in.p.rt.cfg.Timeout}
		case exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled:
			kind = KindCanceled
			err = fmt.Errorf("caller gave up: %w", ctx.Err())
		default:
			err = fmt.Errorf("exited with code %d", exit.ExitCode())
		}
	}
	return &Error{Plugin: in.p.name, Kind: kind, Err: err, Stderr: in.stderr.String()}
}

func (in *instance) alloc(n uint64) uint64 {
	if n == 0 {
		return 0
	}
	off := uint64(len(in.arena)+7) &^ 7
	if off == 0 {
		off = 8
	}
	if off+n > uint64(in.p.rt.cfg.MaxArena) {
		// Extism reports exhaustion as a null block, but go-pdk does not check for one and
		// would store over offset 0: stop the call instead.
		trap("alloc of %d bytes exceeds the %d-byte host memory limit", n, in.p.rt.cfg.MaxArena)
	}
	end := len(in.arena)
	in.arena = slices.Grow(in.arena, int(off+n)-end)[:off+n]
	// Blocks reuse the bytes of earlier calls: clear them, so nothing a previous call left
	// can change this call's answer.
	clear(in.arena[end:])
	in.blocks = append(in.blocks, block{off, n})
	return off
}

func (in *instance) allocBytes(s string) uint64 {
	p := in.alloc(uint64(len(s)))
	if p != 0 {
		copy(in.arena[p:], s)
	}
	return p
}

// length answers the length of the block at p, or 0 when p does not start a block.
func (in *instance) length(p uint64) uint64 {
	i, ok := slices.BinarySearchFunc(in.blocks, p, func(b block, p uint64) int {
		switch {
		case b.off < p:
			return -1
		case b.off > p:
			return 1
		}
		return 0
	})
	if !ok {
		return 0
	}
	return in.blocks[i].len
}

func (in *instance) block(p uint64, what string) []byte {
	n := in.length(p)
	if n == 0 && p != 0 {
		// Extism allows zero-length blocks only as the null block.
		trap("%s: %d is not a block of host memory", what, p)
	}
	return in.arena[p : p+n]
}

func (in *instance) arenaRange(p, n uint64, what string) []byte {
	if n == 0 {
		return nil
	}
	if p < 8 || p+n < p || p+n > uint64(len(in.arena)) {
		trap("%s: [%d,%d) is outside the %d bytes of host memory", what, p, p+n, len(in.arena))
	}
	return in.arena[p : p+n]
}

func (in *instance) inputRange(off, n uint64) []byte {
	if off+n < off || off+n > uint64(len(in.input)) {
		trap("input read at [%d,%d) is outside the %d-byte input", off, off+n, len(in.input))
	}
	return in.input[off : off+n]
}

func (in *instance) setOutput(b []byte) { in.output = append(in.output[:0], b...) }

const maxErrorBytes = 64 << 10

func (in *instance) setError(b []byte) {
	if len(b) > maxErrorBytes {
		b = b[:maxErrorBytes]
	}
	in.errMsg, in.errSet = string(b), true
}

func (in *instance) setVar(key string, val uint64) {
	if old, ok := in.vars[key]; ok {
		in.varLen -= len(key) + len(old)
		delete(in.vars, key)
	}
	if val == 0 {
		return
	}
	v := in.block(val, "var_set")
	if in.varLen+len(key)+len(v) > maxVars {
		trap("var_set: vars would exceed %d bytes", maxVars)
	}
	in.vars[key] = slices.Clone(v)
	in.varLen += len(key) + len(v)
}

func (in *instance) logMessage(level zerolog.Level, msg []byte) {
	if e := in.p.log.WithLevel(level); e != nil {
		e.Bool("guest", true).Msg(string(msg))
	}
}

// headBuffer keeps the first max bytes written and counts the rest: a Go guest's panic or
// fatal error starts with its message ("fatal error: out of memory", "panic: ..."), and what
// follows is a dump of every goroutine, kilobytes that say little.
type headBuffer struct {
	mu      sync.Mutex
	buf     []byte
	max     int
	dropped int
}

func newHeadBuffer(max int) *headBuffer { return &headBuffer{max: max} }

func (t *headBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	room := max(t.max-len(t.buf), 0)
	keep := min(room, len(p))
	t.buf = append(t.buf, p[:keep]...)
	t.dropped += len(p) - keep
	return len(p), nil
}

// String is what was kept, followed by how much was not when something was cut.
func (t *headBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return capText(string(t.buf), MaxErrorStderr, t.dropped)
}

func (t *headBuffer) Reset() {
	t.mu.Lock()
	t.buf, t.dropped = t.buf[:0], 0
	t.mu.Unlock()
}

// capText keeps the first limit bytes of s (cut at a line end when one is near) and says how
// many bytes were cut, counting dropped bytes that never reached s.
func capText(s string, limit, dropped int) string {
	if len(s) > limit {
		cut := limit
		if i := strings.LastIndexByte(s[:limit], '\n'); i > limit/2 {
			cut = i
		}
		dropped += len(s) - cut
		s = s[:cut]
	}
	if dropped == 0 {
		return s
	}
	return strings.TrimRight(s, "\n") + "\n[" + strconv.Itoa(dropped) + " more bytes cut]"
}

// random is the guest's WASI random source: a ChaCha8 stream with a fixed seed, restarted before
// every call, so the bytes a call sees do not depend on which instance serves it or on how many
// calls that instance served before.
//
// Reseeding costs about 0.12 us, a tenth of a trivial call, so reset skips it when the stream was
// not read since the last one: it is then still at its start.
type random struct {
	c    *rand.ChaCha8
	read bool
}

func newRandom() *random { return &random{c: rand.NewChaCha8([32]byte{})} }

func (r *random) reset() {
	if r.read {
		r.c.Seed([32]byte{})
		r.read = false
	}
}

func (r *random) Read(p []byte) (int, error) {
	r.read = true
	return r.c.Read(p)
}

// clock is the guest's WASI clocks: virtual time, starting at 0 in every instance, that moves
// forward clockStep per reading and by the full amount of every sleep, which returns at once.
//
// wazero's default fake clocks move 1 ms per reading. The Go runtime in a guest reads the
// monotonic clock in its scheduler and collector, and with time rushing by like that the guest's
// part of averagely's whole-group call took 31 us instead of 23 (RATIONALE.md).
type clock struct{ now atomic.Int64 }

const (
	clockStep = int64(time.Microsecond)
	// clockEpoch is the wall time of virtual time 0: 2022-01-01T00:00:00Z, as wazero's fake.
	clockEpoch = int64(1640995200) * int64(time.Second)
)

func (c *clock) nanotime() int64 { return c.now.Add(clockStep) }

func (c *clock) walltime() (int64, int32) {
	t := clockEpoch + c.now.Add(clockStep)
	return t / 1e9, int32(t % 1e9)
}

func (c *clock) sleep(ns int64) { c.now.Add(max(ns, 0)) }
