package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	// keyForce+name tries name's file again, rejected contents included: a retry after a
	// deadline (retryLater).
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
				if name, ok := strings.CutPrefix(key, keyForce); ok {
					r.retry(name)
				} else {
					r.check(key, false)
				}
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

// pluginName is pluginName limited to the names Options.Only accepts.
func (r *Registry) pluginName(base string) (string, bool) {
	name, ok := pluginName(base)
	if ok && r.opts.Only != nil && !r.opts.Only(name) {
		return "", false
	}
	return name, ok
}

func (r *Registry) path(name string) string { return filepath.Join(r.dir, name+".wasm") }

// scan checks every plugin file in the folder, every name already known and every name the
// Keeper holds a version of.
func (r *Registry) scan(force bool) { r.scanNames(force, nil) }

// initialScan is New's scan: it says how many plugins it loads and how far it got, since
// compiling them may take seconds each on a first start.
func (r *Registry) initialScan() {
	start := time.Now()
	var total int
	r.scanNames(false, func(done, n int, name string) {
		total = n
		if done == 0 {
			r.log.Info().Int("plugins", n).Str("dir", r.dir).Msg("loading plugins")
		} else {
			r.log.Info().Str("plugin", name).Int("done", done).Int("of", n).Msg("plugin checked")
		}
		if r.opts.Progress != nil {
			r.opts.Progress(done, n)
		}
	})
	r.log.Info().Int("plugins", total).Str("took", time.Since(start).Round(time.Millisecond).String()).Msg("plugins loaded")
}

func (r *Registry) scanNames(force bool, progress func(done, total int, name string)) {
	names := map[string]bool{}
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		r.log.Error().Err(err).Str("dir", r.dir).Msg("reading plugin folder")
		return
	}
	for _, de := range ents {
		if name, ok := r.pluginName(de.Name()); ok {
			names[name] = true
		}
	}
	for name := range *r.entries.Load() {
		names[name] = true
	}
	for _, name := range r.builtinNames() {
		names[name] = true
	}
	if r.opts.Keeper != nil {
		kept, err := r.opts.Keeper.Names()
		if err != nil {
			r.log.Error().Err(err).Msg("listing kept plugin versions")
		}
		for _, name := range kept {
			names[name] = true
		}
	}
	sorted := slices.Sorted(maps.Keys(names))
	if progress != nil {
		progress(0, len(sorted), "")
	}
	for i, name := range sorted {
		if r.closed() {
			return
		}
		r.check(name, force)
		if progress != nil {
			progress(i+1, len(sorted), name)
		}
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
	data, err := readStable(path, r.rt.Config().MaxModuleBytes)
	builtin := false
	if errors.Is(err, fs.ErrNotExist) {
		if b, ok := r.builtin(name); ok {
			data, err, builtin = b, nil, true
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if target, lerr := os.Readlink(path); lerr == nil {
			e := r.ensureEntry(name)
			err = fmt.Errorf("%s is a symlink to %s, which does not exist", path, target)
			r.reject(e, "", "read", err, r.clock.Now(), 0, 0)
			r.fallBack(e, err.Error())
			return outFailed
		}
		return r.fileRemoved(name)
	case errors.Is(err, errUnstable):
		// Still being written: look again once it has been quiet for a while.
		r.schedule(name, r.settle)
		return outUnstable
	case errors.Is(err, errEmpty):
		// cp and editors truncate first; the write that follows sends another event. An
		// empty file that stays so is rejected like any bad version.
		if q := r.quiet(name); q < r.debounce {
			r.schedule(name, r.debounce-q)
			return outEmpty
		}
		e := r.ensureEntry(name)
		if e.failedHash == emptyHash && !force {
			return outSkipped
		}
		err = fmt.Errorf("%s is empty (0 bytes)", path)
		r.reject(e, emptyHash, "read", err, r.clock.Now(), 0, 0)
		r.fallBack(e, err.Error())
		return outFailed
	case err != nil:
		e := r.ensureEntry(name)
		r.reject(e, "", "read", err, r.clock.Now(), 0, 0)
		r.fallBack(e, err.Error())
		return outFailed
	}
	hash := host.Hash(data)
	e := r.ensureEntry(name)
	if v := e.active.Load(); v != nil && v.v.Hash == hash {
		e.pending = nil
		r.mu.Lock()
		e.builtin = builtin
		r.mu.Unlock()
		r.restored(e, v)
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
	r.reject(e, f.hash, f.stage, f.err, f.attempt, f.took, r.retryDelay(e, f))
	r.fallBack(e, fmt.Sprintf("%s (hash %s) was rejected: %s", filepath.Base(path), short(f.hash), f.err))
	return outFailed
}

// emptyHash is the content hash of an empty file.
var emptyHash = host.Hash(nil)

// restored notes that the file holds the version serving: whatever was wrong with it (a
// rejected version, a version served from the Keeper) is over.
func (r *Registry) restored(e *entry, v *version) {
	r.mu.Lock()
	was := e.kept || e.rejected != nil || e.lastError != ""
	e.kept, e.keptWhy, e.rejected, e.lastError, e.retryAt, e.builtinErr = false, "", nil, "", time.Time{}, ""
	r.mu.Unlock()
	e.failedHash, e.retryHash, e.retries = "", "", 0
	if was {
		r.log.Info().Str("plugin", e.name).Str("hash", short(v.v.Hash)).Msg("plugin file holds the version serving again")
		r.emit(Event{Name: e.name, Kind: Restored, Hash: v.v.Hash, Version: v.v.Version})
	}
}

// fallBack serves the version the Keeper holds for e when no version serves (at start, or
// after the file was never good): why says what is wrong with the file.
func (r *Registry) fallBack(e *entry, why string) {
	if r.opts.Keeper == nil || e.active.Load() != nil || r.closed() {
		return
	}
	data, hash, ok, err := r.opts.Keeper.Kept(e.name)
	if err != nil {
		r.log.Error().Err(err).Str("plugin", e.name).Msg("reading the kept version")
		return
	}
	if !ok {
		return
	}
	e.keptWhy = why
	if _, f := r.loadVersion(e, data, hash, false, true); f != nil {
		r.log.Error().Err(f.err).Str("plugin", e.name).Str("hash", short(hash)).Str("stage", f.stage).
			Msg("the kept version of the plugin failed too; no version serves")
	}
}

// readStable reads a file (following symlinks) of at most limit bytes and refuses a read during
// which it changed.
func readStable(path string, limit int) ([]byte, error) {
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
	if st1.Size() > int64(limit) {
		return nil, fmt.Errorf("%s is %d bytes, more than the limit of %d for a plugin file", path, st1.Size(), limit)
	}
	data, err := readAtMost(path, int(st1.Size()))
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

// readAtMost reads a file expected to hold size bytes, reading no more than one byte past it (a
// file that grew meanwhile is caught by the caller's second stat, never read whole).
func readAtMost(path string, size int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, size+1)
	n, err := io.ReadFull(f, data)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return data[:n], nil
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

// load prepares, self-tests and validates a new version of e's file (or its built-in), and
// swaps it in only if every step passed; otherwise it returns the failure, for the caller to
// record or retry.
func (r *Registry) load(e *entry, data []byte, hash string, builtin bool) (string, *failure) {
	return r.loadVersion(e, data, hash, builtin, false)
}

// loadVersion is load for a version from the file, a built-in, or (kept) the Keeper.
func (r *Registry) loadVersion(e *entry, data []byte, hash string, builtin, kept bool) (string, *failure) {
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

	if !kept && !builtin && r.opts.Keeper != nil {
		// Kept before it serves, so that what serves can always be served after a restart.
		// A failure (a full disk) costs only that.
		if err := r.opts.Keeper.Keep(e.name, hash, data); err != nil {
			r.log.Error().Err(err).Str("plugin", e.name).Str("hash", short(hash)).
				Msg("could not keep the validated version; after a restart only the file can serve")
		}
	}
	v := &version{r: r, p: p, v: Version{Hash: hash, Version: p.Info().Version}, data: data}
	v.refs.Store(1) // the registry's own
	r.draining.Add(1)
	r.mu.Lock()
	old := e.active.Swap(v)
	e.builtin = builtin
	e.loadedAt = r.clock.Now()
	e.kept = kept
	if !kept {
		e.lastAttempt, e.lastAttemptHash, e.lastError = attempt, hash, ""
		e.rejected, e.keptWhy, e.retryAt = nil, "", time.Time{}
	}
	e.builtinErr = ""
	if old != nil {
		e.reloads++
	}
	r.mu.Unlock()
	if !kept {
		e.failedHash, e.retryHash, e.retries = "", "", 0
	}
	kind, outcome := Loaded, outLoaded
	ev := r.log.Info().Str("plugin", e.name).Str("hash", short(hash)).Str("version", v.v.Version).Bool("builtin", builtin).Dur("took", took)
	if old != nil {
		old.unref() // closes once the calls in flight and the Acquires on it are done
		kind, outcome = Reloaded, outReloaded
		ev = ev.Str("previous", short(old.v.Hash))
	}
	if kept {
		r.log.Warn().Str("plugin", e.name).Str("hash", short(hash)).Str("version", v.v.Version).
			Str("kept", r.keptWhere(e.name, hash)).Str("because", e.keptWhy).
			Msg("plugin file cannot serve; serving the last validated version instead")
	} else {
		ev.Msg("plugin version serving")
	}
	if r.opts.Metrics != nil {
		r.opts.Metrics.ObserveReload(e.name, ResultOK, took)
	}
	r.emit(Event{Name: e.name, Kind: kind, Hash: hash, Version: v.v.Version, Kept: kept})
	return outcome, nil
}

// reject records a version that may not serve. It is tried again in retryIn unless that is 0.
func (r *Registry) reject(e *entry, hash, stage string, err error, attempt time.Time, took time.Duration, retryIn time.Duration) {
	reason := err.Error()
	if stage != "load" { // the host's load errors say "load" already
		reason = stage + ": " + reason
	}
	r.mu.Lock()
	e.lastAttempt, e.lastAttemptHash, e.lastError = attempt, hash, reason
	e.rejected = &Rejection{Hash: hash, Reason: reason, At: attempt}
	e.failures++
	e.retryAt = time.Time{}
	if retryIn > 0 {
		e.retryAt = r.clock.Now().Add(retryIn)
	}
	r.mu.Unlock()
	if hash != "" {
		e.failedHash = hash
	}
	ev := r.log.Error().Str("plugin", e.name).Str("hash", short(hash)).Str("stage", stage).Str("reason", err.Error())
	if retryIn > 0 {
		ev = ev.Dur("retryIn", retryIn).Int("retry", e.retries).Int("retries", r.opts.Retries)
		r.retryLater(e.name, retryIn)
	}
	if v := e.active.Load(); v != nil {
		ev.Str("serving", short(v.v.Hash)).Msg("plugin version rejected; the previous version keeps serving")
	} else {
		ev.Msg("plugin version rejected; no version of it serves")
	}
	if r.opts.Metrics != nil && hash != "" {
		r.opts.Metrics.ObserveReload(e.name, ResultFailed, took)
	}
	r.emit(Event{Name: e.name, Kind: Failed, Hash: hash, Err: reason})
}

// retryDelay returns how long to wait before the file's version that failed with f is tried
// again, and counts the try: 0 (never) unless a deadline refused it, RetryAfter before the first
// try of that version, doubling up to maxRetryWait (or RetryAfter, if longer); 0 once it was
// tried Retries times.
func (r *Registry) retryDelay(e *entry, f *failure) time.Duration {
	if !errors.Is(f.err, context.DeadlineExceeded) || r.closed() {
		return 0
	}
	if e.retryHash != f.hash {
		e.retryHash, e.retries = f.hash, 0
	}
	if e.retries >= r.opts.Retries {
		return 0
	}
	d, limit := r.opts.RetryAfter, max(maxRetryWait, r.opts.RetryAfter)
	for range e.retries {
		d = min(2*d, limit)
	}
	e.retries++
	return max(d, 1)
}

// maxRetryWait bounds the wait before a version refused for a deadline is tried again.
const maxRetryWait = 10 * time.Minute

// retry tries name's file again after a deadline refused its version, unless a version that is
// not to be tried again (a failure of its own) was rejected since: then it only checks the file.
func (r *Registry) retry(name string) {
	e := (*r.entries.Load())[name]
	r.check(name, e != nil && e.retryHash != "" && e.retryHash == e.failedHash)
}

// retryLater checks name again in d, its rejected version included.
func (r *Registry) retryLater(name string, d time.Duration) {
	key := keyForce + name
	if r.opts.after != nil {
		r.opts.after(d, func() { r.enqueue(key) })
		return
	}
	r.schedule(key, d)
}

// fileRemoved unloads name, unless something still uses it: then the last version keeps serving
// and the status says the file is gone.
func (r *Registry) fileRemoved(name string) string {
	e := (*r.entries.Load())[name]
	if e == nil || e.active.Load() == nil {
		// Never served. A plugin in use with a kept version serves that (a restart after
		// its file was removed); otherwise there is nothing to keep.
		if r.opts.Keeper != nil && r.inUse(name) {
			if _, _, ok, _ := r.opts.Keeper.Kept(name); ok {
				e = r.ensureEntry(name)
				r.mu.Lock()
				e.fileGone = true
				r.mu.Unlock()
				r.fallBack(e, r.path(name)+" is missing")
				if e.active.Load() != nil {
					return outGone
				}
			}
		}
		if e == nil {
			r.forget(name)
			return outAbsent
		}
		r.mu.Lock()
		r.removeEntryLocked(name)
		r.mu.Unlock()
		r.forget(name)
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
	r.forget(name)
	r.log.Info().Str("plugin", name).Str("hash", short(old.v.Hash)).Msg("plugin file removed; plugin unloaded")
	r.emit(Event{Name: name, Kind: Removed, Hash: old.v.Hash, Version: old.v.Version})
	return outRemoved
}

// forget drops the kept version of a plugin that is gone and unused.
func (r *Registry) forget(name string) {
	if r.opts.Keeper == nil {
		return
	}
	if err := r.opts.Keeper.Forget(name); err != nil {
		r.log.Warn().Err(err).Str("plugin", name).Msg("forgetting the kept version")
	}
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

// selfTest makes one whole-group call, which must succeed and pass abi.ValidateFor.
func selfTest(ctx context.Context, p *host.Plugin) error {
	req := selfTestRequest()
	resp, err := p.Allocate(ctx, req)
	if err != nil {
		return err
	}
	info := p.Info()
	return abi.ValidateFor(&info, req, resp)
}

func validate(ctx context.Context, f func(context.Context, *host.Plugin) error, p *host.Plugin) (err error) {
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("panic: %v", x)
		}
	}()
	return f(ctx, p)
}
