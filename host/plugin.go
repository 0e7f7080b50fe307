package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/tetratelabs/wazero"

	"github.com/allocd/allocd/abi"
)

// Plugin is one compiled module with its pool of instances. Its methods are safe for concurrent
// use: each call takes an idle instance or starts a new one, up to Config.MaxInstances.
type Plugin struct {
	rt *Runtime
	wr wazero.Runtime // the wazero runtime the module was compiled by
	// interruptible: the module was instrumented by loopcheck, so a call is stopped by setting
	// its instance's interrupt global rather than by wazero's context checks.
	interruptible bool
	name          string
	hash          string
	compiled      wazero.CompiledModule
	info          abi.Info
	loadedAt      time.Time
	log           zerolog.Logger
	pool          pool
	stats         stats
	encoders      encoderPool

	closeOnce sync.Once
	closing   chan struct{}
	inflight  sync.WaitGroup
	mu        sync.Mutex // guards closed and inflight.Add against Close
	closed    bool
}

type stats struct {
	calls, failures, traps, timeouts, invalid atomic.Int64
	instances, created, discarded             atomic.Int64
	memory                                    atomic.Int64
}

// Stats are a plugin's counters since it was loaded.
type Stats struct {
	Calls     int64 `json:"calls"`
	Failures  int64 `json:"failures"`
	Traps     int64 `json:"traps"`
	Timeouts  int64 `json:"timeouts"`
	Invalid   int64 `json:"invalid"`
	Instances int64 `json:"instances"`
	Created   int64 `json:"created"`
	Discarded int64 `json:"discarded"`
	// MemoryBytes is the linear memory of the plugin's live instances, as of the end of their
	// last calls: a guest whose heap keeps growing shows here before the memory limit retires
	// its instances.
	MemoryBytes int64 `json:"memoryBytes"`
}

func newPlugin(rt *Runtime, name, hash string, compiled wazero.CompiledModule) *Plugin {
	p := &Plugin{
		rt: rt, name: name, hash: hash, compiled: compiled, loadedAt: time.Now(),
		log:     rt.log.With().Str("plugin", name).Logger(),
		closing: make(chan struct{}),
	}
	p.pool.init(rt.cfg.MaxInstances)
	p.encoders.max = rt.cfg.MaxInstances
	return p
}

// Name is the name the plugin was loaded under.
func (p *Plugin) Name() string { return p.name }

// Hash is the hex SHA-256 of the module's bytes.
func (p *Plugin) Hash() string { return p.hash }

// Info is the plugin's self-description. A plugin without allocd_describe gets its load name
// and version "unknown".
func (p *Plugin) Info() abi.Info { return p.info }

// LoadedAt is when the plugin finished loading.
func (p *Plugin) LoadedAt() time.Time { return p.loadedAt }

// Stats returns the plugin's counters.
func (p *Plugin) Stats() Stats {
	s := &p.stats
	return Stats{
		Calls: s.calls.Load(), Failures: s.failures.Load(), Traps: s.traps.Load(), Timeouts: s.timeouts.Load(),
		Invalid: s.invalid.Load(), Instances: s.instances.Load(), Created: s.created.Load(), Discarded: s.discarded.Load(),
		MemoryBytes: s.memory.Load(),
	}
}

func (p *Plugin) describe(ctx context.Context, in *instance) error {
	v, err := in.invoke(ctx, in.version, nil, nil)
	if err != nil {
		return err
	}
	major, minor := abi.SplitVersion(v)
	if major != abi.Major {
		return &Error{Plugin: p.name, Kind: KindLoad, Err: fmt.Errorf("plugin speaks ABI %d.%d; this host speaks %d.x", major, minor, abi.Major)}
	}
	if in.describe == nil {
		p.info = abi.Info{Name: p.name, Version: "unknown", ABI: fmt.Sprintf("%d.%d", major, minor)}
		return nil
	}
	out, err := in.call(ctx, in.describe, nil, nil)
	if err != nil {
		return err
	}
	info, err := abi.ParseInfo(out)
	if err != nil {
		return &Error{Plugin: p.name, Kind: KindLoad, Err: fmt.Errorf("allocd_describe: %w", err)}
	}
	p.info = *info
	return nil
}

// Allocate asks the plugin for an assignment. It sorts req.Queues and req.Consumers into
// canonical order first (abi.Canonicalize, which replaces those slices rather than reordering the
// caller's), so the indices in the response refer to req's sorted lists. The answer is checked
// with abi.ValidateFor (abi.Validate unless the plugin declares "overlapping"); a failing answer
// is an error, never returned.
func (p *Plugin) Allocate(ctx context.Context, req *abi.Request) (*abi.Response, error) {
	return p.allocate(ctx, req, answerLists, nil)
}

// AllocateOwners is Allocate for a caller that reads an owner-form answer (ABI 1.1, ABI.md §5.4)
// itself. When the plugin answers in the owner form, the response's Owners has one entry per
// queue of the sorted req.Queues, checked by abi.CheckOwners (each abi.NoOwner or the first
// index in req.Consumers of its owner's id), and its Results stay empty: the per-consumer lists
// that Allocate builds from the owners are left out (RATIONALE.md). A list-form answer comes back
// as Allocate returns it (Results, checked; Owners nil).
func (p *Plugin) AllocateOwners(ctx context.Context, req *abi.Request) (*abi.Response, error) {
	return p.allocate(ctx, req, answerOwners, nil)
}

// AllocateOwnersFunc is AllocateOwners for a caller that reads the answer while the instance still
// holds it: use gets the checked response, and an owner-form answer's Owners are the instance's
// output buffer itself (abi.DecodeResponseShared), valid only until use returns and never to be
// written. Nothing is allocated or copied for them, which is a whole-group call's largest
// allocation on the host (RATIONALE.md). An error from use is returned as it is.
func (p *Plugin) AllocateOwnersFunc(ctx context.Context, req *abi.Request, use func(*abi.Response) error) error {
	var useLists func(*abi.Response, []int, []int) error
	if use != nil {
		useLists = func(r *abi.Response, _, _ []int) error { return use(r) }
	}
	_, err := p.allocate(ctx, req, answerOwners, useLists)
	return err
}

// AllocateOwnerListsFunc is AllocateOwnersFunc for a caller that builds every consumer's list of
// queues itself from an owner-form answer: the answer is checked and grouped by owner in one pass
// (abi.Encoder.CheckedOwnerLists), and use gets, beside the response, consumer index o's queues
// in req.Queues as flat[bounds[o]:bounds[o+1]], ascending (none for an index that repeats an
// earlier id). flat and bounds are the caller's to keep; Owners, as for AllocateOwnersFunc, are
// valid only until use returns. A list-form answer comes as AllocateOwnersFunc gives it, flat and
// bounds nil. It spares the check's own pass over the owners, a twelfth of the embedding API's
// whole-group call (RATIONALE.md).
func (p *Plugin) AllocateOwnerListsFunc(ctx context.Context, req *abi.Request, use func(resp *abi.Response, flat, bounds []int) error) error {
	_, err := p.allocate(ctx, req, answerOwnerLists, use)
	return err
}

// answerForm is what allocate gives its caller of an owner-form answer.
type answerForm uint8

const (
	answerLists      answerForm = iota // Results, resolved from the owners (Allocate)
	answerOwners                       // the owners, checked (AllocateOwners)
	answerOwnerLists                   // the owners, checked and grouped (AllocateOwnerListsFunc)
)

// allocate encodes req, calls the plugin and checks its answer. With use, the answer is decoded
// sharing the output's memory and handed to use while the instance is held; else it is returned.
func (p *Plugin) allocate(ctx context.Context, req *abi.Request, form answerForm, use func(resp *abi.Response, flat, bounds []int) error) (*abi.Response, error) {
	enc := p.encoders.get()
	defer p.encoders.put(enc)
	var err error
	enc.buf, err = enc.EncodeCanonical(enc.buf[:0], req) // abi.Canonicalize, checked as it encodes
	if err != nil {
		return nil, &Error{Plugin: p.name, Kind: KindInvalid, Err: fmt.Errorf("request: %w", err)}
	}
	var (
		resp    = &abi.Response{}
		useErr  error
		decoder = abi.DecodeResponse
	)
	if use != nil {
		decoder = abi.DecodeResponseShared
	}
	err = p.Call(ctx, enc.buf, req.Config, func(out []byte) error {
		if err := decoder(out, resp); err != nil {
			return err
		}
		var (
			err          error
			flat, bounds []int
		)
		switch {
		case form == answerOwners && resp.Owners != nil:
			err = enc.CheckOwners(req, resp.Owners) // what the encoding learned spares a pass
		case form == answerOwnerLists && resp.Owners != nil:
			flat, bounds, err = enc.CheckedOwnerLists(req, resp.Owners) // the same pass spared
		case resp.Owners != nil:
			err = enc.Validate(req, resp) // resolved into lists, the same pass spared
		default:
			err = abi.ValidateFor(&p.info, req, resp)
		}
		if err == nil && use != nil {
			useErr = use(resp, flat, bounds) // not the plugin's fault: returned as it is, not as an invalid answer
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if useErr != nil {
		return nil, useErr
	}
	return resp, nil
}

type encoder struct {
	abi.Encoder
	buf []byte
}

// encoderPool keeps the encoders of finished calls for the next ones, at most max of them (one
// per instance), the last one put handed out first. A sync.Pool is emptied by every collection:
// then a group of 100,000 queues, whose rebalances are a collection or so apart, had its queues
// encoded and copied anew at every call, where an encoder kept finds them in its cache
// (RATIONALE.md, "Why a plugin keeps its request encoders across collections"). What an
// encoder keeps is its last request: at most max requests' worth per plugin.
type encoderPool struct {
	mu   sync.Mutex
	idle []*encoder
	max  int
}

func (e *encoderPool) get() *encoder {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.idle); n > 0 {
		enc := e.idle[n-1]
		e.idle[n-1] = nil
		e.idle = e.idle[:n-1]
		return enc
	}
	return &encoder{}
}

func (e *encoderPool) put(enc *encoder) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.idle) < e.max {
		e.idle = append(e.idle, enc)
	}
}

// Call runs allocate on an encoded request and hands the raw output to use, which must not keep
// it: the buffer belongs to the instance. An error from use is reported as an invalid answer.
// Allocate is Call plus encoding and checking; Call serves tools that work on raw encodings.
func (p *Plugin) Call(ctx context.Context, input []byte, config map[string]string, use func(out []byte) error) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.inflight.Done()
	p.stats.calls.Add(1)
	in, err := p.acquire(ctx)
	if err != nil {
		p.stats.failures.Add(1)
		return err
	}
	out, err := in.call(ctx, in.allocate, input, config)
	if err == nil {
		if uerr := use(out); uerr != nil {
			err = &Error{Plugin: p.name, Kind: KindInvalid, Err: uerr}
		}
	}
	p.release(ctx, in, err)
	if err != nil {
		p.count(err)
		p.log.Warn().Err(err).Msg("plugin call failed")
	}
	return err
}

func (p *Plugin) count(err error) {
	p.stats.failures.Add(1)
	var e *Error
	if errors.As(err, &e) {
		switch e.Kind {
		case KindTrap:
			p.stats.traps.Add(1)
		case KindTimeout:
			p.stats.timeouts.Add(1)
		case KindInvalid:
			p.stats.invalid.Add(1)
		}
	}
}

func (p *Plugin) enter() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return &Error{Plugin: p.name, Kind: KindClosed, Err: errors.New("plugin is closed")}
	}
	p.inflight.Add(1)
	return nil
}

// acquire takes an idle instance, or starts one when fewer than MaxInstances exist, or waits.
func (p *Plugin) acquire(ctx context.Context) (*instance, error) {
	select {
	case p.pool.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, &Error{Plugin: p.name, Kind: KindCanceled, Err: fmt.Errorf("waiting for an instance: %w", ctx.Err())}
	}
	if in := p.pool.get(); in != nil {
		return in, nil
	}
	in, err := p.newInstance(context.WithoutCancel(ctx))
	if err != nil {
		<-p.pool.slots
		return nil, err
	}
	p.stats.created.Add(1)
	return in, nil
}

// release returns an instance to the pool, or discards it when the call broke it (a trap or a
// timeout leaves a Go guest's runtime in an undefined state), when it grew past three quarters
// of the memory cap, or after RecycleAfter calls.
func (p *Plugin) release(ctx context.Context, in *instance, err error) {
	defer func() { <-p.pool.slots }()
	// A call that ended as its deadline fired may have left the interrupt set: discard.
	broken := in.tainted || err != nil && !IsKind(err, KindFailed) && !IsKind(err, KindInvalid)
	in.measureMemory()
	grown := in.memory > int64(p.rt.cfg.MemoryLimitPages)*65536/4*3
	if broken || grown || in.calls >= p.rt.cfg.RecycleAfter {
		in.close(context.WithoutCancel(ctx))
		p.stats.discarded.Add(1)
		return
	}
	p.pool.put(in)
}

// Close stops new calls, waits for calls in flight (or ctx), then frees every instance and the
// compiled code.
func (p *Plugin) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("plugin %q: close: %w with calls in flight", p.name, ctx.Err())
	}
	for in := p.pool.get(); in != nil; in = p.pool.get() {
		in.close(context.Background())
	}
	return p.compiled.Close(context.Background())
}

type pool struct {
	slots chan struct{}
	mu    sync.Mutex
	idle  []*instance
}

func (p *pool) init(max int) { p.slots = make(chan struct{}, max) }

func (p *pool) get() *instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.idle); n > 0 {
		in := p.idle[n-1]
		p.idle = p.idle[:n-1]
		return in
	}
	return nil
}

func (p *pool) put(in *instance) {
	p.mu.Lock()
	p.idle = append(p.idle, in)
	p.mu.Unlock()
}
