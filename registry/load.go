package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
)

// Work queue keys besides plugin names (which are never empty and never start with a NUL).
const (
	keyRescan = ""     // look at every name again
	keyForce  = "\x00" // look at every name again, retrying rejected contents
)

// Outcomes of a check, for the tests' hook.
const (
	outLoaded    = "loaded"
	outReloaded  = "reloaded"
	outFailed    = "failed"
	outPending   = "pending" // failed, but the file changed a moment ago: read it again later
	outUnchanged = "unchanged"
	outSkipped   = "skipped" // the same contents were rejected before
	outUnstable  = "unstable"
	outEmpty     = "empty"
	outGone      = "gone"
	outRemoved   = "removed"
	outAbsent    = "absent"
)

var (
	errUnstable = errors.New("file changed while it was read")
	errEmpty    = errors.New("file is empty")
)

// work runs checks one at a time, off the watcher's goroutine: compiling competes with traffic
// for the CPU, and one at a time is what the host allows anyway.
func (r *Registry) work() {
	defer close(r.stopped)
	for {
		select {
		case <-r.stop:
			return
		case <-r.wake:
		}
		for {
			if r.closed() {
				return
			}
			key, ok := r.next()
			if !ok {
				break
			}
			switch key {
			case keyRescan:
				r.scan(false)
			case keyForce:
				r.scan(true)
			default:
				r.check(key, false)
			}
		}
	}
}

// Rescan looks at every plugin file again (as a ConfigMap swap does), retrying contents that
// were rejected before: use it after fixing what made a version fail validation, or after
// Options.InUse changed its mind about a removed plugin.
func (r *Registry) Rescan() { r.enqueue(keyForce) }

func (r *Registry) enqueue(key string) {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	if r.closed() {
		return
	}
	if !r.queued[key] {
		r.queued[key] = true
		r.queue = append(r.queue, key)
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Registry) next() (string, bool) {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	if len(r.queue) == 0 {
		return "", false
	}
	key := r.queue[0]
	r.queue = r.queue[1:]
	delete(r.queued, key)
	return key, true
}

// changed notes a watcher event for key and enqueues key once it has seen no other for Settle.
func (r *Registry) changed(key string) {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	r.lastEvent[key] = time.Now()
	r.scheduleLocked(key, r.settle)
}

// quiet is how long ago the watcher last reported a change to name (a long time when never).
func (r *Registry) quiet(name string) time.Duration {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	t, ok := r.lastEvent[name]
	if !ok {
		return time.Duration(1<<63 - 1)
	}
	q := time.Since(t)
	if q >= r.debounce {
		delete(r.lastEvent, name)
	}
	return q
}

// schedule enqueues key after delay; a later call restarts the timer.
func (r *Registry) schedule(key string, delay time.Duration) {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	r.scheduleLocked(key, delay)
}

func (r *Registry) scheduleLocked(key string, delay time.Duration) {
	if r.closed() {
		return
	}
	if t, ok := r.timers[key]; ok {
		t.Reset(delay)
		return
	}
	var t *time.Timer
	t = time.AfterFunc(delay, func() {
		r.qmu.Lock()
		if r.timers[key] == t {
			delete(r.timers, key)
		}
		r.qmu.Unlock()
		r.enqueue(key)
	})
	r.timers[key] = t
}

// pluginName returns the plugin a file name in the folder stands for: NAME for NAME.wasm, but
// nothing for hidden files (.x.wasm, ..data, an editor's .#x) or other suffixes (x.wasm~,
// x.wasm.tmp).
func pluginName(base string) (string, bool) {
	if strings.HasPrefix(base, ".") || !strings.HasSuffix(base, ".wasm") {
		return "", false
	}
	name := strings.TrimSuffix(base, ".wasm")
	return name, name != ""
}

func (r *Registry) path(name string) string { return filepath.Join(r.dir, name+".wasm") }

// scan checks every plugin file in the folder and every name already known.
func (r *Registry) scan(force bool) {
	names := map[string]bool{}
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		r.log.Error().Err(err).Str("dir", r.dir).Msg("reading plugin folder")
		return
	}
	for _, de := range ents {
		if name, ok := pluginName(de.Name()); ok {
			names[name] = true
		}
	}
	for name := range *r.entries.Load() {
		names[name] = true
	}
	for _, name := range r.builtinNames() {
		names[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if r.closed() {
			return
		}
		r.check(name, force)
	}
}

// check brings plugin name in line with its file.
func (r *Registry) check(name string, force bool) {
	outcome := r.checkFile(name, force)
	if outcome == outFailed {
		outcome = r.builtinFallback(name, outcome)
	}
	r.log.Debug().Str("plugin", name).Str("outcome", outcome).Msg("checked")
	if r.opts.checked != nil {
		r.opts.checked(name, outcome)
	}
}

func (r *Registry) checkFile(name string, force bool) string {
	path := r.path(name)
	data, err := readStable(path)
	builtin := false
	if errors.Is(err, fs.ErrNotExist) {
		if b, ok := r.builtin(name); ok {
			data, err, builtin = b, nil, true
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r.fileRemoved(name)
	case errors.Is(err, errUnstable):
		// Still being written: look again once it has been quiet for a while.
		r.schedule(name, r.settle)
		return outUnstable
	case errors.Is(err, errEmpty):
		// cp and editors truncate first; the write that follows sends another event.
		return outEmpty
	case err != nil:
		e := r.ensureEntry(name)
		r.reject(e, "", "read", err, r.clock.Now(), 0)
		return outFailed
	}
	hash := host.Hash(data)
	e := r.ensureEntry(name)
	if v := e.active.Load(); v != nil && v.v.Hash == hash {
		e.pending = nil
		r.mu.Lock()
		e.builtin = builtin
		r.mu.Unlock()
		return outUnchanged
	}
	if hash == e.failedHash && !force {
		return outSkipped
	}
	f := e.pending
	e.pending = nil
	if f == nil || f.hash != hash {
		// A new version: try it.
		outcome, fail := r.load(e, data, hash, builtin)
		if fail == nil || r.closed() {
			return outcome
		}
		f = fail
	}
	// The version failed. If the file changed a moment ago it may be a copy in progress: read
	// it again once it has been quiet for Debounce, and only then believe the failure.
	if q := r.quiet(name); q < r.debounce {
		e.pending = f
		r.schedule(name, r.debounce-q)
		return outPending
	}
	r.reject(e, f.hash, f.stage, f.err, f.attempt, f.took)
	return outFailed
}

// readStable reads a file (following symlinks) and refuses a read during which it changed.
func readStable(path string) ([]byte, error) {
	st1, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st1.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st1.Size() == 0 {
		return nil, errEmpty
	}
	if st1.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d a plugin may have", path, st1.Size(), MaxFileSize)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errUnstable // replaced or removed meanwhile: its event follows
		}
		return nil, err
	}
	st2, err := os.Stat(path)
	if err != nil {
		return nil, errUnstable
	}
	if !os.SameFile(st1, st2) || st1.Size() != st2.Size() || !st1.ModTime().Equal(st2.ModTime()) ||
		int64(len(data)) != st2.Size() {
		return nil, errUnstable
	}
	return data, nil
}

// ensureEntry returns name's entry, adding it when new, and notes that its file exists.
func (r *Registry) ensureEntry(name string) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := *r.entries.Load()
	if e := m[name]; e != nil {
		if e.fileGone {
			e.fileGone = false
			r.log.Info().Str("plugin", name).Msg("plugin file is back")
		}
		return e
	}
	e := &entry{name: name, file: r.path(name)}
	next := make(map[string]*entry, len(m)+1)
	for k, v := range m {
		next[k] = v
	}
	next[name] = e
	r.entries.Store(&next)
	return e
}

// removeEntryLocked drops name from the map; r.mu is held.
func (r *Registry) removeEntryLocked(name string) {
	m := *r.entries.Load()
	next := make(map[string]*entry, len(m))
	for k, v := range m {
		if k != name {
			next[k] = v
		}
	}
	r.entries.Store(&next)
}

// load prepares, self-tests and validates a new version, and swaps it in only if every step
// passed; otherwise it returns the failure, for the caller to record or retry.
func (r *Registry) load(e *entry, data []byte, hash string, builtin bool) (string, *failure) {
	start := time.Now()
	attempt := r.clock.Now()
	ctx := r.ctx
	stage := "load"
	p, err := r.rt.Load(ctx, e.name, data)
	if err == nil {
		vctx, cancel := context.WithTimeout(ctx, r.opts.ValidateTimeout)
		stage = "self-test"
		err = selfTest(vctx, p)
		if err == nil && r.opts.Validate != nil {
			stage = "validate"
			err = validate(vctx, r.opts.Validate, p)
		}
		cancel()
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			p.Close(cctx)
			cancel()
		}
	}
	took := time.Since(start)
	if err != nil {
		return outFailed, &failure{hash: hash, stage: stage, err: err, attempt: attempt, took: took}
	}

	v := &version{r: r, p: p, v: Version{Hash: hash, Version: p.Info().Version}}
	v.refs.Store(1) // the registry's own
	r.draining.Add(1)
	r.mu.Lock()
	old := e.active.Swap(v)
	e.builtin = builtin
	e.loadedAt = r.clock.Now()
	e.lastAttempt, e.lastAttemptHash, e.lastError = attempt, hash, ""
	if old != nil {
		e.reloads++
	}
	r.mu.Unlock()
	e.failedHash = ""
	kind, outcome := Loaded, outLoaded
	ev := r.log.Info().Str("plugin", e.name).Str("hash", short(hash)).Str("version", v.v.Version).Bool("builtin", builtin).Dur("took", took)
	if old != nil {
		old.unref() // closes once the calls in flight and the Acquires on it are done
		kind, outcome = Reloaded, outReloaded
		ev = ev.Str("previous", short(old.v.Hash))
	}
	ev.Msg("plugin version serving")
	if r.opts.Metrics != nil {
		r.opts.Metrics.ObserveReload(e.name, ResultOK, took)
	}
	r.emit(Event{Name: e.name, Kind: kind, Hash: hash, Version: v.v.Version})
	return outcome, nil
}

// reject records a version that may not serve.
func (r *Registry) reject(e *entry, hash, stage string, err error, attempt time.Time, took time.Duration) {
	reason := err.Error()
	if stage != "load" { // the host's load errors say "load" already
		reason = stage + ": " + reason
	}
	r.mu.Lock()
	e.lastAttempt, e.lastAttemptHash, e.lastError = attempt, hash, reason
	e.failures++
	r.mu.Unlock()
	if hash != "" {
		e.failedHash = hash
	}
	ev := r.log.Error().Str("plugin", e.name).Str("hash", short(hash)).Str("stage", stage).Str("reason", err.Error())
	if v := e.active.Load(); v != nil {
		ev = ev.Str("serving", short(v.v.Hash))
	}
	ev.Msg("plugin version rejected; the previous version keeps serving")
	if r.opts.Metrics != nil && hash != "" {
		r.opts.Metrics.ObserveReload(e.name, ResultFailed, took)
	}
	r.emit(Event{Name: e.name, Kind: Failed, Hash: hash, Err: reason})
}

// fileRemoved unloads name, unless something still uses it: then the last version keeps serving
// and the status says the file is gone.
func (r *Registry) fileRemoved(name string) string {
	e := (*r.entries.Load())[name]
	if e == nil {
		return outAbsent
	}
	if e.active.Load() == nil { // never served: just forget it
		r.mu.Lock()
		r.removeEntryLocked(name)
		r.mu.Unlock()
		return outRemoved
	}
	external := r.opts.InUse != nil && r.opts.InUse(name)
	r.mu.Lock()
	if external || r.uses[name] > 0 {
		was := e.fileGone
		e.fileGone = true
		r.mu.Unlock()
		if !was {
			v := e.active.Load()
			r.log.Warn().Str("plugin", name).Str("hash", short(v.v.Hash)).
				Msg("plugin file removed while in use; its last version keeps serving")
			r.emit(Event{Name: name, Kind: Gone, Hash: v.v.Hash, Version: v.v.Version})
		}
		return outGone
	}
	old := e.active.Swap(nil)
	r.removeEntryLocked(name)
	r.mu.Unlock()
	old.unref()
	r.log.Info().Str("plugin", name).Str("hash", short(old.v.Hash)).Msg("plugin file removed; plugin unloaded")
	r.emit(Event{Name: name, Kind: Removed, Hash: old.v.Hash, Version: old.v.Version})
	return outRemoved
}

// selfTestRequest is a small group: two topics on two brokers, 16 queues, three consumers,
// asked about as a whole.
func selfTestRequest() *abi.Request {
	req := &abi.Request{Group: "allocd-self-test", Consumers: []string{"self-test-0", "self-test-1", "self-test-2"}}
	for _, topic := range []string{"self-test-a", "self-test-b"} {
		for _, broker := range []string{"broker-a", "broker-b"} {
			for id := range int32(4) {
				req.Queues = append(req.Queues, abi.Queue{Topic: topic, BrokerName: broker, QueueID: id})
			}
		}
	}
	return req
}

// selfTest makes one whole-group call, which must succeed and pass abi.Validate.
func selfTest(ctx context.Context, p *host.Plugin) error {
	req := selfTestRequest()
	resp, err := p.Allocate(ctx, req)
	if err != nil {
		return err
	}
	return abi.Validate(req, resp)
}

func validate(ctx context.Context, f func(context.Context, *host.Plugin) error, p *host.Plugin) (err error) {
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("panic: %v", x)
		}
	}()
	return f(ctx, p)
}
