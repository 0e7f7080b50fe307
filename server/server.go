package server

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/allocd/allocd/coordinator"
)

// Plugins is the plugin registry as the API shows it. Values are encoded as JSON as they are.
type Plugins interface {
	// List returns the status of every plugin.
	List() any
	// Get returns one plugin's status, and whether it exists.
	Get(name string) (any, bool)
}

// Defaults of Options.
const (
	DefaultMaxBody     = 1 << 20
	DefaultMaxWait     = 60 * time.Second
	DefaultDefaultWait = 30 * time.Second
)

// Options set up a Server.
type Options struct {
	// Coordinator answers every /v1 request (required).
	Coordinator *coordinator.Coordinator
	// Plugins answers /v1/plugins; nil shows none.
	Plugins Plugins
	// Modules answers /v1/plugins/{name}/module; nil serves none.
	Modules Modules
	// Logger receives one debug line per request, and 5xx errors at error level.
	Logger zerolog.Logger
	// Gatherer serves /metrics; nil leaves /metrics out.
	Gatherer prometheus.Gatherer
	// Metrics, if set, receives the HTTP request metrics.
	Metrics prometheus.Registerer
	// MaxBody caps request bodies (DefaultMaxBody, 1 MiB).
	MaxBody int64
	// MaxWait caps a long-poll's wait (DefaultMaxWait); DefaultWait is its wait when the
	// client gives after but no wait (DefaultDefaultWait).
	MaxWait, DefaultWait time.Duration
	// Ready reports whether the daemon can serve (/readyz); nil means ready.
	Ready func() error
	// Warnings, if set, lists what /readyz reports alongside readiness (a plugin served from
	// its kept version, a rejected plugin file), one sentence each.
	Warnings func() []string
	// NoParking keeps every long-poll waiting in its handler instead of parking it (park.go).
	// A parked poll is answered on its connection directly, past any handler wrapped around
	// the server's, so a wrapper that must see each answer (the HA router, which refuses the
	// answers of a term that has ended) needs it.
	NoParking bool
}

// latencyBuckets are the bounds of the latency histograms: 100 us .. 26 s.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 4, 10)

// Server is the HTTP API.
type Server struct {
	opts     Options
	c        *coordinator.Coordinator
	log      zerolog.Logger
	handler  http.Handler
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	// heartbeats within batches, and their latency (batch.go)
	batched        *prometheus.CounterVec
	batchedSeconds prometheus.Histogram
	batchedPolls   *prometheus.CounterVec

	drainOnce sync.Once
	drain     chan struct{}
	waiting   atomic.Int64 // long-polls blocked on a change (each of a batch), for tests
	parked    parking      // HTTP/1.1 long-polls taken over from net/http (park.go)
}

// New builds the server and its routes.
func New(opts Options) (*Server, error) {
	if opts.Coordinator == nil {
		return nil, errors.New("server: Options.Coordinator is required")
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.DefaultWait <= 0 {
		opts.DefaultWait = DefaultDefaultWait
	}
	s := &Server{
		opts: opts, c: opts.Coordinator, log: opts.Logger, drain: make(chan struct{}),
		parked: parking{idle: make(chan struct{}, 1)},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "allocd_http_request_seconds", Help: "HTTP request latency by route (long-polls included).",
			Buckets: latencyBuckets,
		}, []string{"route"}),
	}
	s.batched, s.batchedSeconds = newBatchMetrics()
	s.batchedPolls = newPollBatchMetric()
	if opts.Metrics != nil {
		parked := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "allocd_http_parked_polls", Help: "HTTP/1.1 assignment long-polls waiting in their group's waiter, or being answered.",
		}, func() float64 { return float64(s.parked.busy.Load()) })
		for _, c := range []prometheus.Collector{s.requests, s.seconds, s.batched, s.batchedSeconds, s.batchedPolls, parked} {
			if err := opts.Metrics.Register(c); err != nil {
				return nil, err
			}
		}
	}
	s.handler = s.routes()
	return s, nil
}

// Handler is the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Drain makes long-polls answer at once and /readyz fail: call it when shutting down, before
// http.Server.Shutdown, so that waiting requests do not hold the shutdown up.
// It returns once the long-polls parked by the server itself have been answered (at most a
// few seconds): http.Server.Shutdown does not wait for them.
func (s *Server) Drain() {
	s.drainOnce.Do(func() { close(s.drain) })
	s.drainParked(answerTimeout)
}

func (s *Server) draining() bool {
	select {
	case <-s.drain:
		return true
	default:
		return false
	}
}

type route struct {
	method, path string
	h            func(w http.ResponseWriter, r *http.Request) error
}

func (s *Server) routes() http.Handler {
	routes := []route{
		{"GET", "/v1/topics", s.listTopics},
		{"PUT", "/v1/topics/{topic}", s.putTopic},
		{"GET", "/v1/topics/{topic}", s.getTopic},
		{"DELETE", "/v1/topics/{topic}", s.deleteTopic},
		{"GET", "/v1/topics/{topic}/route", s.route},
		{"POST", "/v1/topics/{topic}/offsets", s.reportOffsets},
		{"GET", "/v1/groups", s.listGroups},
		{"PUT", "/v1/groups/{group}", s.putGroup},
		{"GET", "/v1/groups/{group}", s.getGroup},
		{"DELETE", "/v1/groups/{group}", s.deleteGroup},
		{"POST", heartbeatPath, s.heartbeat},
		{"POST", "/v1/heartbeats", s.heartbeats},
		{"POST", "/v1/groups/{group}/leave", s.leave},
		{"GET", "/v1/groups/{group}/assignment", s.assignment},
		{"POST", "/v1/assignments", s.assignments},
		{"POST", "/v1/groups/{group}/preview", s.preview},
		{"GET", "/v1/groups/{group}/history", s.history},
		{"GET", "/v1/groups/{group}/explain", s.explain},
		{"POST", "/v1/groups/{group}/locks/queues", s.lockQueues},
		{"POST", "/v1/groups/{group}/unlock/queues", s.unlockQueues},
		{"POST", "/v1/groups/{group}/locks/message-groups", s.lockMessageGroup},
		{"POST", "/v1/groups/{group}/release/message-groups", s.releaseMessageGroup},
		{"POST", "/v1/groups/{group}/locks/check", s.checkLock},
		{"GET", "/v1/groups/{group}/locks", s.listLocks},
		{"GET", "/v1/plugins", s.listPlugins},
		{"GET", "/v1/plugins/{name}", s.getPlugin},
		{"GET", "/v1/plugins/{name}/module", s.module},
		{"GET", "/healthz", s.healthz},
		{"GET", "/readyz", s.readyz},
	}
	mux := http.NewServeMux()
	methods := map[string][]string{}
	var paths []string
	for _, rt := range routes {
		pattern := rt.method + " " + rt.path
		mux.Handle(pattern, s.wrap(pattern, rt.h))
		if methods[rt.path] == nil {
			paths = append(paths, rt.path)
		}
		methods[rt.path] = append(methods[rt.path], rt.method)
	}
	if s.opts.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{}))
		paths = append(paths, "/metrics")
		methods["/metrics"] = []string{"GET"}
	}
	// A path with a method of its own wins over the same path without one, so these answer
	// only the methods a path does not serve: a JSON 405 instead of the mux's plain text.
	for _, p := range paths {
		allow := methods[p]
		if slices.Contains(allow, "GET") {
			allow = append(allow, "HEAD")
		}
		mux.Handle(p, s.wrap(p, func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Allow", joinComma(allow))
			return &apiError{status: http.StatusMethodNotAllowed, msg: "method " + r.Method + " not allowed on " + r.URL.Path + "; allowed: " + joinComma(allow)}
		}))
	}
	mux.Handle("/", s.wrap("unknown", func(w http.ResponseWriter, r *http.Request) error {
		return &apiError{status: http.StatusNotFound, msg: "no such endpoint: " + r.URL.Path + " (the API is under /v1)"}
	}))
	return &apiHandler{s: s, mux: mux, heartbeat: s.newRouteMetrics("POST " + heartbeatPath)}
}

const heartbeatPath = "/v1/groups/{group}/heartbeat"

// apiHandler serves the routes. A heartbeat alone, the daemon's most frequent request from
// clients that do not batch, is served without the mux when its path is plainly one
// (heartbeatGroup): the mux's path cleaning, routing tree and path values were some 2.5k
// instructions of an h2c heartbeat's 166k (callgrind; RATIONALE.md, "Why heartbeats sent
// together share one request"). Every other request, and any heartbeat path the mux might
// read otherwise (escapes, dot segments, other characters), goes through the mux.
type apiHandler struct {
	s         *Server
	mux       *http.ServeMux
	heartbeat *routeMetrics
}

func (h *apiHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if group, ok := heartbeatGroup(r); ok {
		h.s.serve(h.heartbeat, w, r, func(w http.ResponseWriter) error { return h.s.heartbeatOf(w, r, group) })
		return
	}
	h.mux.ServeHTTP(w, r)
}

// heartbeatGroup reports the group of a POST to /v1/groups/{group}/heartbeat whose path is
// written without escapes and whose group name has only letters, digits, '_' and '-', the
// requests for which the mux would call the heartbeat route with that group
// (TestHeartbeatRouteIsTheMux).
func heartbeatGroup(r *http.Request) (string, bool) {
	const prefix, suffix = "/v1/groups/", "/heartbeat"
	p := r.URL.Path
	if r.Method != http.MethodPost || r.URL.RawPath != "" || len(p) <= len(prefix)+len(suffix) ||
		p[:len(prefix)] != prefix || p[len(p)-len(suffix):] != suffix {
		return "", false
	}
	group := p[len(prefix) : len(p)-len(suffix)]
	for i := 0; i < len(group); i++ {
		if c := group[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return "", false
		}
	}
	return group, true
}

func joinComma(ss []string) string {
	var b bytes.Buffer
	for i, s := range ss {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s)
	}
	return b.String()
}

// wrap limits the body, writes a handler's error as JSON, and records metrics and a log line.
func (s *Server) wrap(pattern string, h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	m := s.newRouteMetrics(pattern)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serve(m, w, r, func(w http.ResponseWriter) error { return h(w, r) })
	})
}

// serve runs h for r as wrap describes.
func (s *Server) serve(m *routeMetrics, w http.ResponseWriter, r *http.Request, h func(w http.ResponseWriter) error) {
	start := time.Now()
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
	sw := &statusWriter{ResponseWriter: w}
	if err := h(sw); err != nil {
		s.writeError(sw, r, err)
	}
	if sw.hijacked {
		return // a parked long-poll: counted when it is answered (park.go)
	}
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	took := time.Since(start)
	m.observe(sw.status, took)
	s.log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Int("status", sw.status).
		Dur("took", took).Msg("request")
}

// routeMetrics are one route's request metrics. The counter of 200 answers and the latency
// histogram are looked up once, when first used, rather than by their labels on every request.
type routeMetrics struct {
	s                   *Server
	pattern             string
	okOnce, secondsOnce sync.Once
	ok                  prometheus.Counter
	seconds             prometheus.Observer
}

func (s *Server) newRouteMetrics(pattern string) *routeMetrics {
	return &routeMetrics{s: s, pattern: pattern}
}

func (m *routeMetrics) observe(status int, took time.Duration) {
	m.secondsOnce.Do(func() { m.seconds = m.s.seconds.WithLabelValues(m.pattern) })
	if status == http.StatusOK {
		m.okOnce.Do(func() { m.ok = m.s.requests.WithLabelValues(m.pattern, "200") })
		m.ok.Inc()
	} else {
		m.s.requests.WithLabelValues(m.pattern, strconv.Itoa(status)).Inc()
	}
	m.seconds.Observe(took.Seconds())
}

type statusWriter struct {
	http.ResponseWriter
	status   int
	hijacked bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := encodeJSON(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, err = w.Write(b)
	return err
}

type errorBody struct {
	Error string `json:"error"`
}

func (s *Server) writeError(w *statusWriter, r *http.Request, err error) {
	if w.status != 0 {
		// The answer has started; all that is left is to log.
		s.log.Warn().Err(err).Str("path", r.URL.Path).Msg("error after the response started")
		return
	}
	status := statusOf(err)
	if status >= 500 {
		s.log.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Int("status", status).Msg("request failed")
	}
	writeJSON(w, status, errorBody{Error: err.Error()})
}

// statusOf maps an error to its HTTP status.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status
	}
	switch coordinator.KindOf(err) {
	case coordinator.KindInvalid:
		return http.StatusBadRequest
	case coordinator.KindNotFound:
		return http.StatusNotFound
	case coordinator.KindConflict:
		return http.StatusConflict
	case coordinator.KindStorage:
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return http.StatusInsufficientStorage
		}
	}
	return http.StatusInternalServerError
}
