package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/builtin"
	"github.com/allocd/allocd/registry"
	"github.com/allocd/allocd/server"
	"github.com/allocd/allocd/store"
	"github.com/allocd/allocd/ui"
)

func init() {
	register(command{"serve", "run the daemon: HTTP API, consumer groups, plugin folder watched for changes", runServe})
}

// Defaults of the serve flags.
const (
	defaultListen = "127.0.0.1:7420"
	// maxRestartGrace bounds --restart-grace: members that have not come back after this long
	// are not coming back, and new members should not wait longer for their queues.
	maxRestartGrace = time.Hour
	// shutdownTimeout bounds how long in-flight requests may take to finish on SIGTERM.
	shutdownTimeout = 10 * time.Second
)

type serveFlags struct {
	listen, dataDir, pluginsDir, cacheDir, configFile, addrFile string
	debugListen                                                 string
	logFormat, logLevel                                         string
	sessionTimeout, restartGrace, debounce, maxDelay            time.Duration
	pluginTimeout, maxWait                                      time.Duration
	restartGraceSet                                             bool
	createStore                                                 bool
	historyLimit                                                int
	historyMaxAge                                               time.Duration
	etcd                                                        etcdFlags // serve_ha.go
	ui                                                          ui.Mode
}

func parseServeFlags(args []string, stderr io.Writer) (*serveFlags, error) {
	f := &serveFlags{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.listen, "listen", defaultListen, "address to serve the HTTP API on (port 0 picks a free port; see --addr-file)")
	dataDir, dataDirErr := defaultDataDir()
	fs.StringVar(&f.dataDir, "data-dir", dataDir, "folder of the persistent state (topics, groups, generations), created if needed")
	fs.BoolVar(&f.createStore, "create-store", false, "accept an empty (0-byte) allocd.db in --data-dir as a new, empty store; without it such a file is refused (a missing file is always created)")
	fs.StringVar(&f.pluginsDir, "plugins-dir", "", "folder of NAME.wasm strategy plugins, watched for changes; they add to the built-in plugins and override those of the same name (default DATA-DIR/plugins, created if needed)")
	fs.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "compiled-code cache folder (\"\" for none)")
	fs.StringVar(&f.configFile, "config", "", "JSON file declaring topics and groups to apply at start")
	fs.StringVar(&f.addrFile, "addr-file", "", "write the address the API listens on to this file once it listens")
	fs.StringVar(&f.debugListen, "debug-listen", "", "address to serve Go's profiles on (net/http/pprof under /debug/pprof/), apart from the API; off when empty. Keep it private: profiles show the process's internals")
	fs.StringVar(&f.logFormat, "log-format", "console", "log format: console or json")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error or disabled")
	fs.DurationVar(&f.sessionTimeout, "session-timeout", coordinator.DefaultSessionTimeout, "drop a member that sent no heartbeat for this long")
	fs.DurationVar(&f.restartGrace, "restart-grace", 0, "after a restart, wait up to this long for members to come back before publishing new generations (default: the session timeout; 0 disables)")
	fs.DurationVar(&f.debounce, "debounce", coordinator.DefaultDebounce, "quiet time after a membership change before recomputing an assignment")
	fs.DurationVar(&f.maxDelay, "max-delay", coordinator.DefaultMaxDelay, "longest a stream of changes may postpone a recomputation")
	fs.DurationVar(&f.pluginTimeout, "plugin-timeout", host.DefaultTimeout, "deadline of each plugin call")
	fs.DurationVar(&f.maxWait, "max-wait", server.DefaultMaxWait, "longest wait a long-poll may ask for")
	fs.IntVar(&f.historyLimit, "history-limit", coordinator.DefaultHistoryLimit, "generations of history kept per (group, topic) (-1: no limit)")
	fs.DurationVar(&f.historyMaxAge, "history-max-age", coordinator.DefaultHistoryMaxAge, "drop history older than this, keeping the newest generation (-1ns: no limit)")
	f.etcd.register(fs)
	fs.Func("ui", "operators' web view at /ui/: off, read (no action offered) or admin (bind a group after a preview, delete a group or topic) (default read)", func(v string) (err error) {
		f.ui, err = ui.ParseMode(v)
		return err
	})
	f.ui = ui.Read
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: allocd serve [flags]

Runs the allocd daemon: the HTTP API under /v1 (topics, groups, heartbeats, long-polled
assignments, previews, plugins), /metrics, /healthz and /readyz. The built-in strategies are in
the binary; every <name>.wasm in --plugins-dir adds one or overrides the built-in of that name; the
folder is watched, so a replaced file reloads. State lives in --data-dir and survives restarts;
SIGTERM or SIGINT shuts down gracefully.

--config FILE declares topics and groups, applied (created or replaced) at every start:
  {"topics": {"T": {"brokers": [{"name": "broker-a", "readQueues": 8, "writeQueues": 8}],
                   "autoscale": {"enabled": true, "min": 1, "max": 64}}},
   "groups": {"g": {"strategy": "averagely", "config": {}, "model": "clustering", "delivery": "queue"}}}`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usageErr("unexpected arguments %q", fs.Args())
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "restart-grace" {
			f.restartGraceSet = true
		}
	})
	switch {
	case f.sessionTimeout < time.Second:
		return nil, usageErr("--session-timeout %v is shorter than 1s", f.sessionTimeout)
	case f.restartGrace < 0 || f.restartGrace > maxRestartGrace:
		return nil, usageErr("--restart-grace %v is outside [0, %v]", f.restartGrace, maxRestartGrace)
	case f.debounce <= 0:
		return nil, usageErr("--debounce %v must be positive", f.debounce)
	case f.maxDelay < f.debounce:
		return nil, usageErr("--max-delay %v is shorter than --debounce %v", f.maxDelay, f.debounce)
	case f.pluginTimeout <= 0:
		return nil, usageErr("--plugin-timeout %v must be positive", f.pluginTimeout)
	case f.maxWait <= 0:
		return nil, usageErr("--max-wait %v must be positive", f.maxWait)
	case f.logFormat != "console" && f.logFormat != "json":
		return nil, usageErr("--log-format %q: want console or json", f.logFormat)
	case f.historyLimit == 0 || f.historyLimit < -1:
		return nil, usageErr("--history-limit %d: want a positive count, or -1 for no limit", f.historyLimit)
	case f.historyMaxAge == 0:
		return nil, usageErr("--history-max-age 0: want a positive age, or a negative one for no limit")
	}
	if err := f.etcd.check(); err != nil {
		return nil, err
	}
	if err := f.defaultDirs(dataDirErr); err != nil {
		return nil, err
	}
	return f, nil
}

// grace is the coordinator's RestartGrace: the session timeout unless set; negative disables.
func (f *serveFlags) grace() time.Duration {
	switch {
	case !f.restartGraceSet:
		return f.sessionTimeout
	case f.restartGrace == 0:
		return -1
	}
	return f.restartGrace
}

func runServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	f, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, f.logLevel, f.logFormat == "json")
	if err != nil {
		return err
	}
	cfg, err := readServeConfig(f.configFile)
	if err != nil {
		return err
	}

	var st store.Store
	var haSt *haOpen // --etcd: serve_ha.go
	var closeStore func() error
	if f.etcd.enabled() {
		if haSt, err = openHA(ctx, f, log); err != nil {
			return err
		}
		st, closeStore = haSt.store, haSt.Close
	} else {
		bolt, err := store.Open(f.dataDir, store.Options{CreateEmpty: f.createStore})
		if err != nil {
			return err
		}
		log.Info().Str("path", bolt.Path()).Msg("store opened")
		if n := bolt.UpgradedFrom(); n > 0 {
			log.Warn().Str("path", bolt.Path()).Int("fromSchema", n).
				Msg("store schema upgraded: an allocd older than this one now refuses the file")
		}
		st, closeStore = bolt, bolt.Close
	}
	defer func() {
		if err := closeStore(); err != nil {
			log.Error().Err(err).Msg("closing the store")
		}
	}()

	// Listen at once: compiling the plugins on a first start takes seconds each, and until
	// they are loaded the daemon answers /healthz, and 503 with the progress everywhere else.
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", f.listen, err)
	}
	addr := ln.Addr().String()
	if f.debugListen != "" {
		stop, err := serveDebug(f.debugListen, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
	}
	if f.addrFile != "" {
		if err := writeFileAtomic(f.addrFile, []byte(addr+"\n")); err != nil {
			ln.Close()
			return fmt.Errorf("--addr-file: %w", err)
		}
	}
	starting := &startupHandler{}
	var handler atomic.Pointer[http.Handler]
	handler.Store(ptr[http.Handler](starting))
	httpSrv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      f.maxWait + 30*time.Second, // a long-poll writes after its wait
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	server.ConfigureHTTP(httpSrv)
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	defer httpSrv.Close() // on an early return; the graceful shutdown comes first otherwise
	log.Info().Str("addr", addr).Msg("listening; loading plugins")

	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reloads, err := newReloadMetrics(metrics)
	if err != nil {
		return err
	}

	rt, err := host.NewRuntime(ctx, host.Config{CacheDir: f.cacheDir, Timeout: f.pluginTimeout, Logger: log})
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())

	var keeper registry.Keeper
	if haSt != nil {
		keeper = haSt.keeper // every replica serves the same bytes
	} else if keeper, err = registry.NewDirKeeper(filepath.Join(f.dataDir, keptPluginsDir)); err != nil {
		return err
	}
	// The registry asks whether a binding still uses a plugin whose file was removed; the
	// coordinator that knows exists only once the registry has loaded the plugins, so until
	// then the stored groups answer (a restart must serve the kept version of a plugin in use).
	stored, err := st.ListGroups()
	if err != nil {
		return err
	}
	calls, checks := newCallStats(), newCheckReports() // for /v1/plugins (pluginview.go)
	var coord atomic.Pointer[coordinator.Coordinator]
	reg, err := registry.New(rt, f.pluginsDir, registry.Options{
		Logger:   log,
		Validate: checks.validate,
		InUse: func(name string) bool {
			if c := coord.Load(); c != nil {
				return c.StrategyInUse(name)
			}
			return slices.ContainsFunc(stored, func(g store.Group) bool { return g.Strategy == name })
		},
		Metrics:  reloads,
		Keeper:   keeper,
		Progress: starting.progress,
		Builtins: builtin.FS(),
	})
	if err != nil {
		return err
	}
	logBuiltins(log, reg)
	// Run closes the registry when it returns; this covers the early returns before it runs.
	defer reg.Close()
	if err := metrics.Register(pluginCollector{reg}); err != nil {
		return err
	}
	if haSt != nil {
		return serveHA(ctx, haServe{
			f: f, log: log, cfg: cfg, ha: haSt, addr: addr, handler: &handler, httpSrv: httpSrv, serveErr: serveErr,
			metrics: metrics, reg: reg, coord: &coord, calls: calls, checks: checks,
		})
	}

	c, err := coordinator.New(coordinator.Options{
		Store: st, Allocator: registryAllocator{reg, calls}, Logger: log, Metrics: metrics,
		SessionTimeout: f.sessionTimeout, Debounce: f.debounce, MaxDelay: f.maxDelay, RestartGrace: f.grace(),
		CheckStrategy: func(name string) error { return checkLoaded(reg, name) },
		HistoryLimit:  f.historyLimit, HistoryMaxAge: f.historyMaxAge,
	})
	if err != nil {
		return err
	}
	coord.Store(c)
	// Subscribe before reading the versions loaded so far, so no reload falls between.
	events, unsubscribe := reg.Subscribe()
	defer unsubscribe()
	for _, s := range reg.Status() {
		if s.ActiveHash != "" {
			c.PluginChanged(s.Name, s.ActiveHash)
		}
	}
	if err := cfg.apply(c); err != nil {
		return fmt.Errorf("--config %s: %w", f.configFile, err)
	}

	modules := newModuleServer(reg)
	srv, err := server.New(server.Options{
		Coordinator: c, Plugins: pluginStatus{reg, calls, checks}, Modules: modules, Logger: log, Gatherer: metrics, Metrics: metrics, MaxWait: f.maxWait,
		Ready:    func() error { return pluginsReady(c, reg) },
		Warnings: func() []string { return pluginWarnings(reg) },
	})
	if err != nil {
		return err
	}
	apiHandler, err := withUI(f, log, httpSrv, srv.Handler())
	if err != nil {
		return err
	}
	handler.Store(ptr(apiHandler))
	grace, graceActive := c.Grace()
	serving, kept, failing := 0, 0, 0
	for _, s := range reg.Status() {
		switch {
		case s.Kept:
			kept++
		case s.ActiveHash != "":
			serving++
		default:
			failing++
		}
	}
	ev := log.Info().Str("addr", addr).Str("dataDir", f.dataDir).Str("pluginsDir", reg.Dir()).
		Int("plugins", serving).Int("pluginsFromKept", kept).Int("pluginsNotServing", failing).
		Dur("sessionTimeout", f.sessionTimeout).Str("ui", string(f.ui))
	if graceActive {
		ev = ev.Time("restartGraceUntil", grace)
	}
	if err := pluginsReady(c, reg); err != nil {
		ev = ev.Str("notReady", err.Error())
	}
	ev.Msg("allocd serving")

	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Go(func() {
		if err := reg.Run(runCtx); err != nil && !errors.Is(err, registry.ErrClosed) {
			errs <- fmt.Errorf("plugin registry: %w", err)
		}
	})
	runCoordinator(runCtx, &wg, c, errs)
	wg.Go(func() {
		for e := range events {
			if e.Kind != registry.Failed {
				modules.changed()
			}
			switch e.Kind {
			case registry.Loaded, registry.Reloaded:
				c.PluginChanged(e.Name, e.Hash)
			case registry.Removed:
				c.PluginChanged(e.Name, "")
			}
		}
	})
	var failure error
	select {
	case <-ctx.Done():
		log.Info().Msg("shutting down: draining requests")
	case err := <-serveErr:
		failure = fmt.Errorf("http: %w", err)
	case err := <-errs:
		failure = err
	}
	// Wake long-polls first, so they answer now instead of holding Shutdown up to their wait.
	srv.Drain()
	c.Close()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := httpSrv.Shutdown(sctx); err != nil {
		log.Warn().Err(err).Msg("requests still running at the shutdown deadline were cut")
		httpSrv.Close()
	}
	stop()
	unsubscribe()
	wg.Wait()
	if failure != nil {
		return failure
	}
	log.Info().Msg("allocd stopped")
	return nil
}

// keptPluginsDir is the folder in --data-dir that keeps the last validated version of every
// plugin (NAME-HASH.wasm), served after a restart when the plugin's file is missing or bad.
const keptPluginsDir = "plugins-good"

func ptr[T any](v T) *T { return &v }

// startupHandler answers while the plugins load: /healthz says the process is alive, everything
// else 503 with how far loading has got.
type startupHandler struct{ done, total atomic.Int64 }

func (h *startupHandler) progress(done, total int) {
	h.done.Store(int64(done))
	h.total.Store(int64(total))
}

func (h *startupHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/healthz" {
		io.WriteString(w, `{"status":"ok"}`+"\n")
		return
	}
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	msg := fmt.Sprintf("starting: loading plugins (%d of %d done)", h.done.Load(), h.total.Load())
	json.NewEncoder(w).Encode(map[string]string{"status": "starting", "error": msg})
}

// pluginsReady fails while a group is bound to a plugin that has no version serving: its
// members would get no assignment.
func pluginsReady(c *coordinator.Coordinator, r *registry.Registry) error {
	var bad []string
	for _, g := range c.Groups() {
		if g.Strategy == "" {
			continue
		}
		s, ok := r.StatusOf(g.Strategy)
		if ok && s.ActiveHash != "" {
			continue
		}
		why := "no such plugin in " + r.Dir()
		if ok && s.LastError != "" {
			why = s.LastError
		}
		bad = append(bad, fmt.Sprintf("group %q is bound to plugin %q, which is not serving (%s)", g.Name, g.Strategy, why))
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// pluginWarnings lists what /readyz reports besides readiness: kept versions serving, rejected
// files, files gone.
func pluginWarnings(r *registry.Registry) []string {
	var out []string
	for _, s := range r.Status() {
		if s.Warning != "" {
			out = append(out, "plugin "+strconv.Quote(s.Name)+": "+s.Warning)
		}
	}
	return out
}

// checkLoaded refuses a binding to a plugin that has no version serving, listing those that do.
func checkLoaded(r *registry.Registry, name string) error {
	s, ok := r.StatusOf(name)
	if ok && s.ActiveHash != "" {
		return nil
	}
	var loaded []string
	for _, s := range r.Status() {
		if s.ActiveHash != "" {
			loaded = append(loaded, s.Name)
		}
	}
	if ok && s.LastError != "" {
		return fmt.Errorf("plugin failed to load from %s: %s (loaded: %s)", s.File, s.LastError, strings.Join(loaded, ", "))
	}
	return fmt.Errorf("no plugin of that name in %s (loaded: %s)", r.Dir(), strings.Join(loaded, ", "))
}

// reloadMetrics adapts the registry's load observations to Prometheus.
type reloadMetrics struct {
	total   *prometheus.CounterVec
	seconds *prometheus.HistogramVec
}

func newReloadMetrics(reg prometheus.Registerer) (*reloadMetrics, error) {
	m := &reloadMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_plugin_reloads_total", Help: "Plugin versions loaded (result ok) or rejected (result failed).",
		}, []string{"plugin", "result"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "allocd_plugin_reload_seconds", Help: "Time from reading a plugin file to serving or rejecting it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 10), // 10 ms .. 5 s
		}, []string{"plugin"}),
	}
	for _, c := range []prometheus.Collector{m.total, m.seconds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *reloadMetrics) ObserveReload(plugin, result string, d time.Duration) {
	m.total.WithLabelValues(plugin, result).Inc()
	m.seconds.WithLabelValues(plugin).Observe(d.Seconds())
}

// pluginCollector reports each serving plugin version's call counters and instances at scrape
// time, from the registry's status. Counters restart from zero when a new version replaces the
// old one, which Prometheus's rate() reads as a counter reset.
type pluginCollector struct{ r *registry.Registry }

var pluginDescs = struct {
	calls, failures, traps, timeouts, invalid, instances, memory *prometheus.Desc
}{
	calls:     prometheus.NewDesc("allocd_plugin_calls_total", "Calls into the serving version of a plugin.", []string{"plugin"}, nil),
	failures:  prometheus.NewDesc("allocd_plugin_call_failures_total", "Calls that failed as a whole, for any reason.", []string{"plugin"}, nil),
	traps:     prometheus.NewDesc("allocd_plugin_traps_total", "Calls that trapped (a Go guest's panic among them).", []string{"plugin"}, nil),
	timeouts:  prometheus.NewDesc("allocd_plugin_timeouts_total", "Calls stopped at their deadline.", []string{"plugin"}, nil),
	invalid:   prometheus.NewDesc("allocd_plugin_invalid_answers_total", "Answers refused by the host's checks.", []string{"plugin"}, nil),
	instances: prometheus.NewDesc("allocd_plugin_instances", "Live instances of a plugin.", []string{"plugin"}, nil),
	memory:    prometheus.NewDesc("allocd_plugin_memory_bytes", "Linear memory of a plugin's live instances.", []string{"plugin"}, nil),
}

func (pluginCollector) Describe(ch chan<- *prometheus.Desc) {
	d := pluginDescs
	for _, desc := range []*prometheus.Desc{d.calls, d.failures, d.traps, d.timeouts, d.invalid, d.instances, d.memory} {
		ch <- desc
	}
}

func (c pluginCollector) Collect(ch chan<- prometheus.Metric) {
	d := pluginDescs
	for _, s := range c.r.Status() {
		if s.ActiveHash == "" {
			continue // no version serves
		}
		st := s.Stats
		for _, m := range []struct {
			desc *prometheus.Desc
			kind prometheus.ValueType
			v    int64
		}{
			{d.calls, prometheus.CounterValue, st.Calls}, {d.failures, prometheus.CounterValue, st.Failures},
			{d.traps, prometheus.CounterValue, st.Traps}, {d.timeouts, prometheus.CounterValue, st.Timeouts},
			{d.invalid, prometheus.CounterValue, st.Invalid}, {d.instances, prometheus.GaugeValue, st.Instances},
			{d.memory, prometheus.GaugeValue, st.MemoryBytes},
		} {
			ch <- prometheus.MustNewConstMetric(m.desc, m.kind, float64(m.v), s.Name)
		}
	}
}

// serveConfig is the --config file: topics and groups declared by the operator.
type serveConfig struct {
	Topics map[string]struct {
		Brokers   []coordinator.Broker `json:"brokers"`
		Autoscale json.RawMessage      `json:"autoscale"`
	} `json:"topics"`
	Groups map[string]coordinator.Binding `json:"groups"`
}

func readServeConfig(path string) (*serveConfig, error) {
	cfg := &serveConfig{}
	if path == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("--config %s: data after the JSON object", path)
	}
	return cfg, nil
}

// apply creates or replaces what the file declares, topics first so groups find them.
func (cfg *serveConfig) apply(c *coordinator.Coordinator) error {
	for _, name := range slices.Sorted(maps.Keys(cfg.Topics)) {
		policy, err := coordinator.ParsePolicy(cfg.Topics[name].Autoscale)
		if err != nil {
			return fmt.Errorf("topic %q: %w", name, err)
		}
		if _, _, err := c.PutTopicAutoscale(name, cfg.Topics[name].Brokers, policy); err != nil {
			return fmt.Errorf("topic %q: %w", name, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Groups)) {
		if _, _, err := c.PutGroup(name, cfg.Groups[name]); err != nil {
			return fmt.Errorf("group %q: %w", name, err)
		}
	}
	return nil
}

// writeFileAtomic writes through a temporary file and a rename, so a reader never sees half.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// withUI mounts the web view (--ui) in front of api, the handler that serves /v1: the view
// reads through it, so on an HA follower it reads what the leader serves.
func withUI(f *serveFlags, log zerolog.Logger, httpSrv *http.Server, api http.Handler) (http.Handler, error) {
	if f.ui == ui.Off {
		return api, nil
	}
	view, err := ui.New(ui.Options{API: api, Mode: f.ui, Logger: log})
	if err != nil {
		return nil, err
	}
	httpSrv.RegisterOnShutdown(view.Close)
	return ui.Mount(api, view), nil
}
