package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/ha"
	"github.com/allocd/allocd/registry"
	"github.com/allocd/allocd/server"
	"github.com/allocd/allocd/store"
)

// High availability: with --etcd, the replicas of a daemon keep their state in etcd and elect
// one leader (package ha); only the leader runs a coordinator, built from the store at each won
// election, and every other replica proxies the API to it.

// DefaultSessionTTL is --etcd-session-ttl's default. Failover takes about one TTL after a
// leader dies (its lease must run out), so shorter is faster; but a TTL must outlast what
// etcd itself takes to change its own leader (about a second with its defaults) plus a slow
// keep-alive, or a healthy leader steps down for nothing. 5 s keeps failover far below the
// session timeout members are dropped after (30 s), so no member is lost to it.
const DefaultSessionTTL = 5 * time.Second

// etcdFlags are serve's flags of the etcd mode.
type etcdFlags struct {
	endpoints              string
	prefix                 string
	cacert, cert, key      string
	sessionTTL             time.Duration
	advertise              string
	dialTimeout, opTimeout time.Duration
}

func (e *etcdFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&e.endpoints, "etcd", "", "comma-separated etcd client URLs: keep the state in etcd and run as one of several replicas, one elected leader (default: the bbolt file in --data-dir)")
	fs.StringVar(&e.prefix, "etcd-prefix", "/allocd/", "key prefix of this daemon's state in etcd (replicas of one daemon share it)")
	fs.StringVar(&e.cacert, "etcd-cacert", "", "PEM file of the CA certificates that etcd's server certificate is checked against")
	fs.StringVar(&e.cert, "etcd-cert", "", "PEM client certificate for etcd (with --etcd-key)")
	fs.StringVar(&e.key, "etcd-key", "", "PEM private key of --etcd-cert")
	fs.DurationVar(&e.sessionTTL, "etcd-session-ttl", DefaultSessionTTL, "TTL of the leader's etcd session (at least 2s, whole seconds): a dead leader is replaced after about this long")
	fs.DurationVar(&e.opTimeout, "etcd-timeout", 5*time.Second, "deadline of each etcd request")
	fs.StringVar(&e.advertise, "advertise-url", "", "URL other replicas proxy the API to when this replica leads (default: http:// and the address listened on)")
	e.dialTimeout = 5 * time.Second
}

func (e *etcdFlags) enabled() bool { return e.endpoints != "" }

func (e *etcdFlags) check() error {
	if !e.enabled() {
		for name, v := range map[string]string{"--etcd-cacert": e.cacert, "--etcd-cert": e.cert, "--etcd-key": e.key, "--advertise-url": e.advertise} {
			if v != "" {
				return usageErr("%s is set but --etcd is not", name)
			}
		}
		return nil
	}
	for _, ep := range e.urls() {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return usageErr("--etcd %q: want URLs such as http://127.0.0.1:2379", ep)
		}
	}
	switch {
	case !strings.HasPrefix(e.prefix, "/") || !strings.HasSuffix(e.prefix, "/"):
		return usageErr("--etcd-prefix %q must start and end with /", e.prefix)
	case e.sessionTTL < ha.MinTTL:
		return usageErr("--etcd-session-ttl %v is below etcd's minimum lease TTL of %v", e.sessionTTL, ha.MinTTL)
	case e.sessionTTL%time.Second != 0:
		return usageErr("--etcd-session-ttl %v: etcd leases count whole seconds", e.sessionTTL)
	case (e.cert == "") != (e.key == ""):
		return usageErr("--etcd-cert and --etcd-key go together")
	case e.opTimeout <= 0:
		return usageErr("--etcd-timeout %v must be positive", e.opTimeout)
	}
	if e.advertise != "" {
		if u, err := url.Parse(e.advertise); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return usageErr("--advertise-url %q: want a URL such as http://10.0.0.5:7420", e.advertise)
		}
	}
	return nil
}

func (e *etcdFlags) urls() []string {
	var out []string
	for _, s := range strings.Split(e.endpoints, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// advertiseURL is --advertise-url, or the address listened on. A wildcard address says nothing
// to the other replicas, so it needs the flag.
func (e *etcdFlags) advertiseURL(addr string) (string, error) {
	if e.advertise != "" {
		return strings.TrimRight(e.advertise, "/"), nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		return "", fmt.Errorf("--listen %s is on every interface: set --advertise-url to the URL the other replicas reach this one at", addr)
	}
	return "http://" + addr, nil
}

// client connects to etcd. The connection is lazy: an etcd down at start costs retries, not a
// refusal to start.
func (e *etcdFlags) client() (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: e.urls(), DialTimeout: e.dialTimeout, Logger: zap.NewNop(), DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second}
	if e.cacert != "" || e.cert != "" || strings.Contains(e.endpoints, "https://") {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if e.cacert != "" {
			b, err := os.ReadFile(e.cacert)
			if err != nil {
				return nil, fmt.Errorf("--etcd-cacert: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(b) {
				return nil, fmt.Errorf("--etcd-cacert %s: no PEM certificate in it", e.cacert)
			}
			tc.RootCAs = pool
		}
		if e.cert != "" {
			pair, err := tls.LoadX509KeyPair(e.cert, e.key)
			if err != nil {
				return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("--etcd %s: %w", e.endpoints, err)
	}
	return cli, nil
}

// fencedStore is the store of the etcd mode: every write succeeds only while the fence key has
// the creation revision set, and fails with store.ErrFenced otherwise.
type fencedStore interface {
	store.Store
	SetFence(key string, createRevision int64)
	ClearFence()
}

// haOpen is what --etcd needs besides the flags: the store and the plugin keeper on etcd.
type haOpen struct {
	cli    *clientv3.Client
	store  fencedStore
	keeper registry.Keeper // the last validated version of each plugin, in etcd
	// fenced is told of a write refused by the fence (the store's OnFenced).
	fenced atomic.Pointer[func(error)]
}

// openHA connects to etcd and opens the store under the prefix.
func openHA(ctx context.Context, f *serveFlags, log zerolog.Logger) (*haOpen, error) {
	cli, err := f.etcd.client()
	if err != nil {
		return nil, err
	}
	h := &haOpen{cli: cli}
	st, keeper, err := openEtcdStore(ctx, cli, f.etcd.prefix, f.etcd.opTimeout, func(err error) {
		if fn := h.fenced.Load(); fn != nil {
			(*fn)(err)
		}
	})
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("--etcd %s: opening the store under %s: %w", f.etcd.endpoints, f.etcd.prefix, err)
	}
	h.store, h.keeper = st, leaderKeeper{keeper, log}
	log.Info().Strs("etcd", f.etcd.urls()).Str("prefix", f.etcd.prefix).Msg("store opened on etcd")
	if u, ok := st.(interface{ UpgradedFrom() int }); ok && u.UpgradedFrom() > 0 {
		log.Warn().Str("prefix", f.etcd.prefix).Int("fromSchema", u.UpgradedFrom()).
			Msg("store schema upgraded: stop replicas older than this one, which misread it")
	}
	return h, nil
}

func (h *haOpen) Close() error {
	err := h.store.Close()
	return errors.Join(err, h.cli.Close())
}

// leaderKeeper keeps plugin versions in etcd on the leader only: a follower's Keep is refused by
// the fence, which is expected, so it is not reported as an error. A replica keeps the versions
// it serves when it wins a term (keepServing), so the versions kept are the leader's, the ones
// that compute every assignment.
type leaderKeeper struct {
	registry.Keeper
	log zerolog.Logger
}

func (k leaderKeeper) Keep(name, hash string, module []byte) error {
	err := k.Keeper.Keep(name, hash, module)
	if errors.Is(err, store.ErrFenced) {
		k.log.Debug().Str("plugin", name).Str("hash", hash).Msg("plugin version not kept: this replica does not lead; it keeps it when it does")
		return nil
	}
	return err
}

// keepServing keeps in etcd the version of each plugin this replica serves from its folder, at
// the start of a term (the fence set), so that what the leader computes with is what every
// replica can serve after a restart.
func keepServing(reg *registry.Registry, keeper registry.Keeper, log zerolog.Logger) {
	for _, p := range reg.Status() {
		if p.ActiveHash == "" || p.Builtin {
			continue
		}
		data, hash, err := reg.Module(p.Name)
		if err == nil {
			err = keeper.Keep(p.Name, hash, data)
		}
		if err != nil {
			log.Warn().Err(err).Str("plugin", p.Name).Msg("could not keep the version in force in etcd")
		}
	}
}

// haServe is what serveHA shares with runServe.
type haServe struct {
	f        *serveFlags
	log      zerolog.Logger
	cfg      *serveConfig
	ha       *haOpen
	addr     string
	handler  *atomic.Pointer[http.Handler]
	httpSrv  *http.Server
	serveErr <-chan error
	metrics  *prometheus.Registry
	reg      *registry.Registry
	coord    *atomic.Pointer[coordinator.Coordinator]
	calls    *callStats // for /v1/plugins (pluginview.go)
	checks   *checkReports
}

// serveHA runs a replica: the election, a coordinator and API server for each term won, the
// router in front, until ctx ends.
func serveHA(ctx context.Context, s haServe) error {
	f, log := s.f, s.log
	self, err := f.etcd.advertiseURL(s.addr)
	if err != nil {
		return err
	}
	var term termGatherer
	gatherer := prometheus.Gatherers{s.metrics, &term}
	modules := newModuleServer(s.reg)
	var router *ha.Router
	el, err := ha.New(ha.Config{
		Client: s.ha.cli, Prefix: f.etcd.prefix + "leader", Value: self, TTL: f.etcd.sessionTTL,
		Logger: log, Metrics: s.metrics,
		Lead: func(ctx context.Context, t ha.Term) error {
			return leadTerm(ctx, s, t, router, modules, &term)
		},
	})
	if err != nil {
		return err
	}
	stepDown := el.Fenced
	s.ha.fenced.Store(&stepDown)
	router = ha.NewRouter(el, self, promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	front, err := withUI(f, log, s.httpSrv, router)
	if err != nil {
		return err
	}
	s.handler.Store(ptr(front))

	events, unsubscribe := s.reg.Subscribe()
	defer unsubscribe()
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() {
		if err := s.reg.Run(runCtx); err != nil && !errors.Is(err, registry.ErrClosed) {
			errs <- fmt.Errorf("plugin registry: %w", err)
		}
	})
	elDone := make(chan struct{})
	wg.Go(func() {
		defer close(elDone)
		el.Run(runCtx)
	})
	wg.Go(func() {
		for e := range events {
			if e.Kind != registry.Failed {
				modules.changed()
			}
			c := s.coord.Load()
			if c == nil {
				continue // the next term reads the registry's status
			}
			switch e.Kind {
			case registry.Loaded, registry.Reloaded:
				c.PluginChanged(e.Name, e.Hash)
			case registry.Removed:
				c.PluginChanged(e.Name, "")
			}
		}
	})
	log.Info().Str("addr", s.addr).Str("advertise", self).Dur("sessionTTL", f.etcd.sessionTTL).
		Int("plugins", len(s.reg.Status())).Msg("allocd replica serving; campaigning for leadership")

	var failure error
	select {
	case <-ctx.Done():
		log.Info().Msg("shutting down: stepping down and draining requests")
	case err := <-s.serveErr:
		failure = fmt.Errorf("http: %w", err)
	case err := <-errs:
		failure = err
	}
	// Step down first (the lease is revoked, so another replica takes over at once), then
	// finish the requests still running.
	stop()
	<-elDone
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := s.httpSrv.Shutdown(sctx); err != nil {
		log.Warn().Err(err).Msg("requests still running at the shutdown deadline were cut")
		s.httpSrv.Close()
	}
	unsubscribe()
	wg.Wait()
	if failure != nil {
		return failure
	}
	log.Info().Msg("allocd stopped")
	return nil
}

// leadTerm runs one term: the store fenced by the term's key, a coordinator loaded from it (so
// the state is what the last leader wrote, and its restart grace lets members re-heartbeat
// before a new generation is published), and the API served from it, until ctx ends.
func leadTerm(ctx context.Context, s haServe, t ha.Term, router *ha.Router, modules *moduleServer, term *termGatherer) error {
	f, log := s.f, s.log.With().Int64("term", t.Rev).Logger()
	st := s.ha.store
	st.SetFence(t.Key, t.Rev)
	defer st.ClearFence()
	metrics := prometheus.NewRegistry()
	c, err := coordinator.New(coordinator.Options{
		Store: st, Allocator: registryAllocator{s.reg, s.calls}, Logger: log, Metrics: metrics,
		SessionTimeout: f.sessionTimeout, Debounce: f.debounce, MaxDelay: f.maxDelay, RestartGrace: f.grace(),
		CheckStrategy: func(name string) error { return checkLoaded(s.reg, name) },
		HistoryLimit:  f.historyLimit, HistoryMaxAge: f.historyMaxAge,
	})
	if err != nil {
		return fmt.Errorf("loading the state: %w", err)
	}
	defer c.Close()
	// Installed before the registry's status is read, so that no reload falls between.
	s.coord.Store(c)
	defer s.coord.CompareAndSwap(c, nil)
	for _, p := range s.reg.Status() {
		if p.ActiveHash != "" {
			c.PluginChanged(p.Name, p.ActiveHash)
		}
	}
	if err := s.cfg.apply(c); err != nil {
		// The same file at every replica: a bad one is reported, not a reason to give up the term.
		log.Error().Err(err).Str("config", f.configFile).Msg("applying --config")
	}
	srv, err := server.New(server.Options{
		Coordinator: c, Plugins: pluginStatus{s.reg, s.calls, s.checks}, Modules: modules, Logger: log, Metrics: metrics, MaxWait: f.maxWait,
		// The router must see every answer, to refuse those of an ended term.
		NoParking: true,
		Ready:     func() error { return pluginsReady(c, s.reg) },
		Warnings:  func() []string { return pluginWarnings(s.reg) },
	})
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	runCtx, stop := context.WithCancel(ctx)
	runCoordinator(runCtx, &wg, c, errs)
	// Beside the term, not before it: a slow etcd delays the keeping, not the leading.
	wg.Go(func() { keepServing(s.reg, s.ha.keeper, log) })
	term.set(metrics)
	router.SetLeading(srv.Handler(), t.Rev)
	grace, active := c.Grace()
	ev := log.Info().Str("key", t.Key)
	if active {
		ev = ev.Time("restartGraceUntil", grace)
	}
	ev.Msg("leading: state loaded from etcd")

	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	router.SetLeading(nil, 0)
	srv.Drain()
	stop()
	wg.Wait()
	term.set(nil)
	return err
}

// termGatherer gathers the current term's metrics (the coordinator's and the API's), none
// between terms.
type termGatherer struct {
	p atomic.Pointer[prometheus.Registry]
}

func (g *termGatherer) set(r *prometheus.Registry) { g.p.Store(r) }

func (g *termGatherer) Gather() ([]*dto.MetricFamily, error) {
	if r := g.p.Load(); r != nil {
		return r.Gather()
	}
	return nil, nil
}

// runCoordinator runs c's rebalancing and lock loops on wg until ctx ends; their failures go to
// errs (room for two).
func runCoordinator(ctx context.Context, wg *sync.WaitGroup, c *coordinator.Coordinator, errs chan<- error) {
	wg.Go(func() {
		if err := c.Run(ctx); err != nil {
			errs <- fmt.Errorf("coordinator: %w", err)
		}
	})
	wg.Go(func() {
		if err := c.RunLocks(ctx); err != nil {
			errs <- fmt.Errorf("locks: %w", err)
		}
	})
}
