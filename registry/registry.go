// Package registry keeps the strategy plugins of one folder loaded and current. Each <name>.wasm
// in the folder is the plugin <name>: a new file loads, a changed file reloads, a removed file
// unloads unless something still uses it (then it keeps serving and its status says the file is
// gone).
//
// A new version never serves before it has proved itself: it is compiled off the request path,
// instantiated and checked against ABI v1 (host.Runtime.Load), run through a self-test (one
// whole-group request that must succeed and pass abi.Validate) and through Options.Validate (the
// daemon passes the harness's quick pass). Only then does it replace the running version, with an
// atomic pointer swap: calls in flight finish on the old version, which is closed once drained. A
// version that fails any step never serves; the previous one keeps serving, and the failure is
// logged and shown in Status.
//
// The watcher copes with the ways files really change: editors writing in place, cp over the file
// (a half-written file never serves: a file is read once it has seen no event for Settle, a read
// must see the same size and modification time before and after, a read that does not load never
// replaces a good version, and it counts as rejected only once the file has been quiet for
// Debounce; until then it is taken for a write in progress and read again),
// write-to-temp-then-rename (temp names such as .x.wasm.tmp, x.wasm~ and .#x are ignored), a
// Kubernetes ConfigMap's ..data symlink swap (any change to a ..name rescans every plugin;
// symlinks are followed), bursts of events, the same bytes written again (versions are
// compared by content hash), and the folder itself removed or renamed and made again (it is
// looked for every FolderPoll, then watched and rescanned).
//
// With Options.Keeper, every version that passed validation is kept (DirKeeper: a folder of
// NAME-HASH.wasm), so that a restart serves it when the plugin's file is missing (and in use),
// empty or rejected; Status says so (Kept, Warning). Module gives the bytes of the version in
// force, for whoever must hand them on.
package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
)

// Defaults of Options.
const (
	// DefaultSettle is how long a plugin file must see no events before it is read. Copies,
	// editor saves, renames and ConfigMap swaps finish within milliseconds, so this coalesces
	// a burst into one read while keeping a cached reload fast.
	DefaultSettle = 50 * time.Millisecond
	// DefaultDebounce is how long a plugin file must see no events before a version of it that
	// fails to load counts as rejected; until then the failure is taken for a write still in
	// progress (a slow copy) and the file is read again.
	DefaultDebounce = 200 * time.Millisecond
	// DefaultValidateTimeout bounds the self-test plus Options.Validate of one new version.
	DefaultValidateTimeout = time.Minute
	// DefaultRetryAfter is how long after a version refused for a deadline it is tried again
	// the first time; the wait doubles with each refusal.
	DefaultRetryAfter = 2 * time.Second
	// DefaultRetries is how many times a version refused for a deadline is tried again: 2 s,
	// 4 s, 8 s, 16 s and 32 s after each refusal, a minute in all.
	DefaultRetries = 5
	// DefaultFolderPoll is how often a plugin folder that was removed or renamed is looked for
	// until it is back (a deploy script's rm -rf and mkdir, a volume remounted).
	DefaultFolderPoll = 250 * time.Millisecond
	// historyLen is how many events Status keeps per plugin.
	historyLen = 16
)

// ErrNotFound is returned (wrapped) for a plugin name that has no version serving. Test with
// errors.Is.
var ErrNotFound = errors.New("plugin not found")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("registry closed")

// Clock stamps status times; tests may fix it.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Metrics receives one observation per version accepted (ResultOK) or rejected (ResultFailed),
// with the time from its read to the swap or the rejection. (A failure not yet believed, on a
// file still being written, is not observed.) The daemon adapts it to Prometheus as
// reloads_total{plugin,result} and reload_seconds.
type Metrics interface {
	ObserveReload(plugin, result string, d time.Duration)
}

// Results passed to Metrics.
const (
	ResultOK     = "ok"
	ResultFailed = "failed"
)

// Options configure a Registry. The zero value of every field means its default.
type Options struct {
	// Logger receives load, reload, rejection and removal events, each with the plugin's name
	// and content hash.
	Logger zerolog.Logger
	// Settle is how long a file must see no events before it is read (DefaultSettle; at most
	// Debounce).
	Settle time.Duration
	// Debounce is how long a file must see no events before a version of it that fails to
	// load is rejected (logged, counted and shown in Status) rather than taken for a write in
	// progress and read again (DefaultDebounce).
	Debounce time.Duration
	// Validate, when set, runs on every new version after the self-test and before the swap;
	// an error rejects the version. The daemon passes a closure calling harness.Quick.
	Validate func(ctx context.Context, p *host.Plugin) error
	// ValidateTimeout bounds the self-test and Validate together (DefaultValidateTimeout).
	ValidateTimeout time.Duration
	// InUse, when set, reports whether something outside the registry (a binding) still uses
	// a plugin; a plugin whose file is removed keeps serving while InUse or a Use holds it.
	InUse func(name string) bool
	// Clock stamps LoadedAt and LastAttempt (the real clock).
	Clock Clock
	// Metrics, when set, observes every load attempt.
	Metrics Metrics
	// Keeper, when set, keeps every version that passed validation, and a plugin whose file is
	// missing (and that is in use), empty or rejected while no version serves (at start) is
	// served from it; Status says so (Kept, Warning).
	Keeper Keeper
	// FolderPoll is how often a removed or renamed plugin folder is looked for until it comes
	// back (DefaultFolderPoll).
	FolderPoll time.Duration
	// Progress, when set, hears how many of the plugin files found at start New has loaded
	// (or rejected) so far, and how many there are.
	Progress func(done, total int)
	// Only, when set, limits the registry to the plugin names it accepts; other files in the
	// folder are ignored. An application embedding one strategy watches one file with it.
	Only func(name string) bool
	// RetryAfter is how long after a version was refused for a deadline it is tried again:
	// its _initialize, self-test or Validate ran out of time (errors.Is(err,
	// context.DeadlineExceeded)), which a machine busy compiling several plugins at once, or
	// serving a burst, makes happen to a good version. Each refusal of the same version
	// doubles the wait, up to 10 minutes or RetryAfter if longer (DefaultRetryAfter). Any
	// other failure is of the version itself: it is not tried again until its file changes or
	// Rescan.
	RetryAfter time.Duration
	// Retries is how many times one version refused for a deadline is tried again before it
	// stays rejected until its file changes or Rescan (DefaultRetries; negative: never).
	Retries int
	// Builtins, when set, is a folder of NAME.wasm plugins that serve whenever the watched
	// folder has no NAME.wasm of its own (builtin.go): a file in the folder overrides the
	// built-in of its name, and removing it brings the built-in back.
	Builtins fs.FS

	// checked, for tests, hears the outcome of every check of a name.
	checked func(name, outcome string)
	// after, for tests, replaces the timer of a retry: f is to run d from now.
	after func(d time.Duration, f func())
}

// Version identifies the version of a plugin that served a call.
type Version struct {
	// Hash is the hex SHA-256 of the module (host.Hash).
	Hash string `json:"hash"`
	// Version is the version the plugin's self-description gives.
	Version string `json:"version"`
}

// Status describes one plugin name: the version serving (if any) and the last load attempt.
type Status struct {
	Name string `json:"name"`
	// File is the plugin's path; FileGone says it was removed while the plugin is still used,
	// so the last version keeps serving.
	File     string `json:"file"`
	FileGone bool   `json:"fileGone,omitempty"`
	// Builtin says the version serving is the built-in one (Options.Builtins): File names
	// where a file overriding it would go.
	Builtin bool `json:"builtin,omitempty"`
	// ActiveHash is the content hash of the version serving, "" when none serves.
	ActiveHash string    `json:"activeHash,omitempty"`
	Version    string    `json:"version,omitempty"`
	Info       abi.Info  `json:"info"`
	LoadedAt   time.Time `json:"loadedAt"`
	// LastAttempt is when the last new version was tried, LastAttemptHash its hash and
	// LastError why it was rejected ("" when it was accepted).
	LastAttempt     time.Time `json:"lastAttempt"`
	LastAttemptHash string    `json:"lastAttemptHash,omitempty"`
	LastError       string    `json:"lastError,omitempty"`
	// Reloads counts versions that replaced a serving one; Failures counts rejected versions.
	Reloads  int        `json:"reloads"`
	Failures int        `json:"failures"`
	Stats    host.Stats `json:"stats"`
	// Rejected names the version the plugin's file holds when that version was rejected; nil
	// once the file holds a version that serves.
	Rejected *Rejection `json:"rejected,omitempty"`
	// RetryAt is when the rejected version will be tried again, because a deadline refused it
	// (Options.RetryAfter); zero when no try is due.
	RetryAt time.Time `json:"retryAt,omitzero"`
	// Kept says that the version serving was read from Options.Keeper, not from the plugin's
	// file (missing, empty or rejected at start).
	Kept bool `json:"kept,omitempty"`
	// Warning says in a sentence what an operator must look at: a kept version serving, a
	// rejected file, a file gone. "" when the plugin serves from its own file.
	Warning string `json:"warning,omitempty"`
	// History is the plugin's last events, oldest first.
	History []Event `json:"history,omitempty"`
}

// Rejection is a version of a plugin's file that may not serve.
type Rejection struct {
	Hash   string    `json:"hash,omitempty"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Registry serves the plugins of one folder. Its methods are safe for concurrent use; the call
// path (Allocate, Acquire) takes no lock shared with other plugins or with reloads.
type Registry struct {
	rt       *host.Runtime
	dir      string
	opts     Options
	log      zerolog.Logger
	clock    Clock
	settle   time.Duration
	debounce time.Duration

	// entries maps a name to its entry; it is replaced, never changed, under mu, so readers
	// need no lock.
	entries atomic.Pointer[map[string]*entry]
	mu      sync.Mutex // guards entries' replacement, entry status fields and uses
	uses    map[string]int

	watcher *fsnotify.Watcher
	wmu     sync.Mutex  // guards re-adding the folder's watch against Close
	polling atomic.Bool // the folder is gone and being looked for
	running atomic.Bool
	// ctx bounds loads; Close cancels it so a validation in progress ends early.
	ctx    context.Context
	cancel context.CancelFunc

	qmu       sync.Mutex // guards the work queue, timers and lastEvent
	timers    map[string]*time.Timer
	lastEvent map[string]time.Time // when the watcher last reported a change to a name
	queue     []string
	queued    map[string]bool
	wake      chan struct{}
	stop      chan struct{} // closed by Close
	stopped   chan struct{} // closed when the worker has returned

	closeOnce sync.Once
	closeErr  error
	draining  sync.WaitGroup // versions not yet closed

	smu  sync.Mutex
	subs map[*subscriber]struct{}
}

// entry is one plugin name.
type entry struct {
	name   string
	active atomic.Pointer[version]

	// Guarded by Registry.mu.
	file            string
	fileGone        bool
	loadedAt        time.Time
	lastAttempt     time.Time
	lastAttemptHash string
	lastError       string
	reloads         int
	failures        int
	rejected        *Rejection
	kept            bool   // the version serving came from the Keeper
	keptWhy         string // why the file could not serve
	history         []Event
	builtin         bool      // the active version is the built-in one
	retryAt         time.Time // when a version refused for a deadline is tried again
	builtinErr      string    // why the built-in failed too, after the file was rejected

	// Worker only: the hash of the last rejected version, not tried again until it changes,
	// and a failure not yet believed because the file changed less than Debounce before.
	failedHash string
	pending    *failure
	// Worker only: the version refused for a deadline and how many times it was tried again.
	retryHash string
	retries   int
}

// failure is a load attempt that failed.
type failure struct {
	hash, stage string
	err         error
	attempt     time.Time
	took        time.Duration
}

// version is one loaded plugin version, reference-counted: the registry holds one reference
// while it is active, every call and Acquire one more; the last release closes it.
type version struct {
	r    *Registry
	p    *host.Plugin
	v    Version
	data []byte // the module's bytes, for Module
	refs atomic.Int64
}

func (v *version) tryRef() bool {
	for {
		n := v.refs.Load()
		if n <= 0 {
			return false
		}
		if v.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (v *version) unref() {
	if v.refs.Add(-1) == 0 {
		go v.close()
	}
}

func (v *version) close() {
	defer v.r.draining.Done()
	if err := v.p.Close(context.Background()); err != nil {
		v.r.log.Warn().Err(err).Str("plugin", v.p.Name()).Str("hash", short(v.v.Hash)).Msg("closing old version")
		return
	}
	v.r.log.Debug().Str("plugin", v.p.Name()).Str("hash", short(v.v.Hash)).Msg("old version drained and closed")
}

// New loads every <name>.wasm in dir before it returns, so the plugins present at start serve at
// once. A file that fails to load is logged and shown in Status, never fatal. New starts
// watching dir at once; Run handles the changes.
func New(rt *host.Runtime, dir string, opts Options) (*Registry, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("registry: plugin folder: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("registry: plugin folder %s is not a folder", abs)
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.Settle <= 0 {
		opts.Settle = DefaultSettle
	}
	opts.Settle = min(opts.Settle, opts.Debounce)
	if opts.ValidateTimeout <= 0 {
		opts.ValidateTimeout = DefaultValidateTimeout
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.FolderPoll <= 0 {
		opts.FolderPoll = DefaultFolderPoll
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = DefaultRetryAfter
	}
	if opts.Retries == 0 {
		opts.Retries = DefaultRetries
	}
	r := &Registry{
		rt: rt, dir: abs, opts: opts, clock: opts.Clock, settle: opts.Settle, debounce: opts.Debounce,
		log:    opts.Logger.With().Str("component", "registry").Logger(),
		uses:   map[string]int{},
		timers: map[string]*time.Timer{}, queued: map[string]bool{}, lastEvent: map[string]time.Time{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
		subs: map[*subscriber]struct{}{},
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	empty := map[string]*entry{}
	r.entries.Store(&empty)
	// Watch before the first scan, so nothing written during it is missed.
	w, err := fsnotify.NewWatcher()
	if err != nil {
		r.cancel()
		return nil, fmt.Errorf("registry: watching %s: %w", abs, err)
	}
	if err := w.Add(abs); err != nil {
		w.Close()
		r.cancel()
		return nil, fmt.Errorf("registry: watching %s: %w", abs, err)
	}
	r.watcher = w
	r.initialScan()
	go r.work()
	return r, nil
}

// Dir is the watched folder (absolute).
func (r *Registry) Dir() string { return r.dir }

// Allocate asks the current version of plugin name for an assignment (host.Plugin.Allocate) and
// says which version answered. A name with no version serving gives an error wrapping
// ErrNotFound.
func (r *Registry) Allocate(ctx context.Context, name string, req *abi.Request) (*abi.Response, Version, error) {
	v, err := r.pin(name)
	if err != nil {
		return nil, Version{}, err
	}
	defer v.unref()
	resp, err := v.p.Allocate(ctx, req)
	return resp, v.v, err
}

// AllocateOwners is Allocate through host.Plugin.AllocateOwners: an owner-form answer comes back
// as resp.Owners, checked, without per-consumer lists.
func (r *Registry) AllocateOwners(ctx context.Context, name string, req *abi.Request) (*abi.Response, Version, error) {
	v, err := r.pin(name)
	if err != nil {
		return nil, Version{}, err
	}
	defer v.unref()
	resp, err := v.p.AllocateOwners(ctx, req)
	return resp, v.v, err
}

// Module returns the bytes and content hash of the version of plugin name in force, or an
// error wrapping ErrNotFound. The bytes are the registry's: do not modify them.
func (r *Registry) Module(name string) ([]byte, string, error) {
	v, err := r.pin(name)
	if err != nil {
		return nil, "", err
	}
	defer v.unref()
	return v.data, v.v.Hash, nil
}

// VersionOf is the version of plugin name in force, without pinning it (two atomic loads and a
// map lookup): for a caller that only wants to know whether the version changed.
func (r *Registry) VersionOf(name string) (Version, bool) {
	if e := (*r.entries.Load())[name]; e != nil {
		if v := e.active.Load(); v != nil {
			return v.v, true
		}
	}
	return Version{}, false
}

// Acquire pins the current version of plugin name until release is called (once; later calls do
// nothing): a reload meanwhile swaps in a new version for other callers, but this one stays open.
// Previews and the harness use it to make several calls to one version.
func (r *Registry) Acquire(name string) (*host.Plugin, func(), error) {
	v, err := r.pin(name)
	if err != nil {
		return nil, nil, err
	}
	var once sync.Once
	return v.p, func() { once.Do(v.unref) }, nil
}

func (r *Registry) pin(name string) (*version, error) {
	e := (*r.entries.Load())[name]
	if e != nil {
		for {
			v := e.active.Load()
			if v == nil {
				break
			}
			if v.tryRef() {
				return v, nil
			}
			// v was swapped out and drained between the load and the reference: the
			// next load sees its successor.
		}
	}
	return nil, r.notFound(name, e)
}

func (r *Registry) notFound(name string, e *entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed() {
		return fmt.Errorf("%w: %w: %q", ErrClosed, ErrNotFound, name)
	}
	if e != nil && e.lastError != "" {
		return fmt.Errorf("%w: %q (%s failed to load: %s)", ErrNotFound, name, filepath.Base(e.file), e.lastError)
	}
	return fmt.Errorf("%w: %q", ErrNotFound, name)
}

func (r *Registry) closed() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// Use marks plugin name as used until release is called (once; later calls do nothing): while
// it is, removing its file does not unload it. The name need not be loaded yet.
func (r *Registry) Use(name string) (release func()) {
	r.mu.Lock()
	r.uses[name]++
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			r.uses[name]--
			last := r.uses[name] == 0
			if last {
				delete(r.uses, name)
			}
			e := (*r.entries.Load())[name]
			gone := last && e != nil && e.fileGone
			r.mu.Unlock()
			if gone {
				r.enqueue(name) // unload now if nothing else holds it
			}
		})
	}
}

// inUse reports whether name is held by a Use or by Options.InUse.
func (r *Registry) inUse(name string) bool {
	r.mu.Lock()
	n := r.uses[name]
	r.mu.Unlock()
	return n > 0 || (r.opts.InUse != nil && r.opts.InUse(name))
}

// Status lists every plugin name the registry knows, serving or not, sorted by name.
func (r *Registry) Status() []Status {
	m := *r.entries.Load()
	out := make([]Status, 0, len(m))
	r.mu.Lock()
	for _, e := range m {
		out = append(out, r.statusLocked(e))
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// StatusOf describes plugin name; false when the registry does not know it.
func (r *Registry) StatusOf(name string) (Status, bool) {
	e := (*r.entries.Load())[name]
	if e == nil {
		return Status{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.statusLocked(e), true
}

func (r *Registry) statusLocked(e *entry) Status {
	s := Status{
		Name: e.name, File: e.file, FileGone: e.fileGone, Builtin: e.builtin, LoadedAt: e.loadedAt,
		LastAttempt: e.lastAttempt, LastAttemptHash: e.lastAttemptHash, LastError: e.lastError,
		Reloads: e.reloads, Failures: e.failures, Kept: e.kept, History: slices.Clone(e.history),
		RetryAt: e.retryAt,
	}
	if e.rejected != nil {
		rej := *e.rejected
		s.Rejected = &rej
	}
	v := e.active.Load()
	if v != nil {
		s.ActiveHash, s.Version, s.Info, s.Stats = v.v.Hash, v.v.Version, v.p.Info(), v.p.Stats()
	}
	file := filepath.Base(e.file)
	switch {
	case e.kept && v != nil:
		s.Warning = fmt.Sprintf("serving the last validated version (hash %s), kept in %s, because %s", short(v.v.Hash), r.keptWhere(e.name, v.v.Hash), e.keptWhy)
	case e.rejected != nil && v != nil:
		s.Warning = fmt.Sprintf("%s (hash %s) was rejected: %s; version %s keeps serving%s", file, short(e.rejected.Hash), e.rejected.Reason, short(v.v.Hash), retryNote(e.retryAt))
	case e.rejected != nil:
		s.Warning = fmt.Sprintf("no version serves: %s (hash %s) was rejected: %s%s", file, short(e.rejected.Hash), e.rejected.Reason, retryNote(e.retryAt))
		if e.builtinErr != "" {
			s.Warning += "; the built-in " + e.name + " failed too: " + e.builtinErr
		}
	case e.fileGone && v != nil:
		s.Warning = fmt.Sprintf("%s was removed while in use; version %s keeps serving", file, short(v.v.Hash))
	}
	return s
}

// retryNote tells when a rejected version is tried again, for Status.Warning.
func retryNote(at time.Time) string {
	if at.IsZero() {
		return ""
	}
	return "; it is tried again at " + at.UTC().Format(time.RFC3339)
}

// keptWhere names where the Keeper holds a version, for messages.
func (r *Registry) keptWhere(name, hash string) string {
	if k, ok := r.opts.Keeper.(interface {
		Path(name, hash string) string
	}); ok {
		return k.Path(name, hash)
	}
	return "the store of kept versions"
}

// Close stops watching, unloads every plugin and waits until every version is drained (calls in
// flight have ended and every Acquire is released) and closed. Run calls it on exit; later calls
// return the first result.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() {
		r.qmu.Lock()
		for _, t := range r.timers {
			t.Stop()
		}
		r.timers = map[string]*time.Timer{}
		close(r.stop)
		r.qmu.Unlock()
		r.cancel()
		<-r.stopped // the worker finishes the load in progress
		r.wmu.Lock()
		r.closeErr = r.watcher.Close()
		r.wmu.Unlock()
		r.mu.Lock()
		old := *r.entries.Load()
		empty := map[string]*entry{}
		r.entries.Store(&empty)
		var vs []*version
		for _, e := range old {
			if v := e.active.Swap(nil); v != nil {
				vs = append(vs, v)
			}
		}
		r.mu.Unlock()
		for _, v := range vs {
			v.unref()
		}
		r.closeSubscribers()
		r.draining.Wait()
	})
	return r.closeErr
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
