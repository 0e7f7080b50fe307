package ha

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
)

// ForwardedHeader marks a request a follower proxies to the leader, with the follower's URL, so
// a replica that receives one while not leading answers 503 instead of forwarding it again.
const ForwardedHeader = "X-Allocd-Forwarded-By"

// LeaderHeader names, on every answer, the replica that computed it.
const LeaderHeader = "X-Allocd-Leader"

// TermHeader carries, on every answer of a leader, the creation revision of its election key:
// the term that computed it. Terms only grow, so a client can drop an answer of an older term.
const TermHeader = "X-Allocd-Term"

// Leadership is what the Router asks of the election: the Elector, or a test's stand-in.
type Leadership interface {
	// Leading reports whether this replica may answer from its memory now.
	Leading() bool
	// Leader returns this replica's role and the leader's advertised URL ("" when none).
	Leader() (Role, string)
}

// Router is the HTTP front of a replica. /healthz and /metrics are always its own; /readyz says
// its role; every other request is served by the term's handler while this replica leads, is
// proxied to the leader while another leads, and is answered 503 with Retry-After while none
// does. An answer the leader's handler writes is sent only if the replica still leads at the
// moment it is written: a long-poll that started in a term and ends after it (the replica was
// paused past its deadline, or stepped down) answers 503 instead of an assignment that may no
// longer be in force.
type Router struct {
	l       Leadership
	metrics http.Handler
	leader  atomic.Pointer[termHandler]
	proxy   *httputil.ReverseProxy
	self    string
}

// NewRouter returns a Router for the replica advertised as self; metrics serves /metrics.
func NewRouter(l Leadership, self string, metrics http.Handler) *Router {
	rt := &Router{l: l, metrics: metrics, self: self}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256 // every consumer behind this replica holds a long-poll
	rt.proxy = &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(pr.In.Context().Value(targetKey{}).(*url.URL))
			pr.SetXForwarded()
			pr.Out.Header.Set(ForwardedHeader, self)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return // the caller went away
			}
			target := r.Context().Value(targetKey{}).(*url.URL)
			unavailable(w, "the leader "+target.String()+" did not answer: "+err.Error()+"; a new leader is elected within the session TTL")
		},
	}
	return rt
}

type targetKey struct{}

type termHandler struct {
	h    http.Handler
	term string
}

// SetLeading installs the handler of the term that began (term: its election key's creation
// revision), or, with nil, removes it.
func (rt *Router) SetLeading(h http.Handler, term int64) {
	if h == nil {
		rt.leader.Store(nil)
		return
	}
	rt.leader.Store(&termHandler{h, strconv.FormatInt(term, 10)})
}

func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz":
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return
	case "/metrics":
		rt.metrics.ServeHTTP(w, r)
		return
	case "/readyz":
		rt.readyz(w, r)
		return
	}
	role, leader := rt.l.Leader()
	h := rt.leader.Load()
	switch {
	case role == RoleLeader && h != nil:
		w.Header().Set(LeaderHeader, rt.self)
		w.Header().Set(TermHeader, h.term)
		h.h.ServeHTTP(&gateWriter{ResponseWriter: w, l: rt.l}, r)
	case role == RoleFollower && r.Header.Get(ForwardedHeader) != "":
		unavailable(w, "this replica ("+rt.self+") does not lead; "+r.Header.Get(ForwardedHeader)+" forwarded the request while the leadership was changing hands")
	case role == RoleFollower:
		target, err := url.Parse(leader)
		if err != nil {
			unavailable(w, "the leader's advertised URL "+leader+" is not a URL: "+err.Error())
			return
		}
		rt.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, target)))
	default:
		unavailable(w, "no leader: the replicas are electing one (or etcd is unreachable); retry shortly")
	}
}

// readyz answers 200 from a leader that is ready and from a follower that knows the leader (it
// serves by proxying), and 503 when no replica leads.
func (rt *Router) readyz(w http.ResponseWriter, r *http.Request) {
	role, leader := rt.l.Leader()
	h := rt.leader.Load()
	switch {
	case role == RoleLeader && h != nil:
		// The term's own /readyz (plugins loaded, restart grace), with the role added.
		rec := &recorder{header: http.Header{}}
		h.h.ServeHTTP(rec, r)
		body := map[string]any{}
		if err := json.Unmarshal(rec.body.Bytes(), &body); err != nil {
			body = map[string]any{"status": "not ready", "error": "the leader's readiness answer was not JSON: " + err.Error()}
			rec.status = http.StatusServiceUnavailable
		}
		if !rt.l.Leading() { // the term ended while it answered
			unavailable(w, "no leader: this replica's term just ended")
			return
		}
		body["role"], body["leader"], body["term"] = string(RoleLeader), rt.self, h.term
		writeJSON(w, rec.status, body)
	case role == RoleFollower:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "role": string(RoleFollower), "leader": leader})
	default:
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{
			"status": "no leader", "role": string(RoleCandidate),
			"error": "no replica leads: an election is running, or etcd is unreachable",
		})
	}
}

// unavailable answers 503 with Retry-After and the API's {"error": ...} body.
func unavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// gateWriter lets a term's answer out only while the replica still leads: checked when the
// status is written, which for a long-poll is after its wait.
type gateWriter struct {
	http.ResponseWriter
	l       Leadership
	decided bool
	stale   bool
}

// errStale is what the term's handler sees when its answer is dropped.
var errStale = errors.New("ha: this replica no longer leads; the answer was not sent")

func (g *gateWriter) decide() {
	if g.decided {
		return
	}
	g.decided = true
	if !g.l.Leading() {
		g.stale = true
		for _, k := range []string{LeaderHeader, TermHeader, "ETag", "Content-Length"} {
			g.ResponseWriter.Header().Del(k)
		}
		unavailable(g.ResponseWriter, "no leader: this replica's term ended before its answer was sent; retry shortly")
	}
}

func (g *gateWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		g.ResponseWriter.WriteHeader(code)
		return
	}
	g.decide()
	if !g.stale {
		g.ResponseWriter.WriteHeader(code)
	}
}

func (g *gateWriter) Write(b []byte) (int, error) {
	g.decide()
	if g.stale {
		return 0, errStale
	}
	return g.ResponseWriter.Write(b)
}

func (g *gateWriter) Header() http.Header { return g.ResponseWriter.Header() }

func (g *gateWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// Flush sends what is written so far, once the gate has let the answer out.
func (g *gateWriter) Flush() {
	if g.decided && !g.stale {
		http.NewResponseController(g.ResponseWriter).Flush()
	}
}

// recorder keeps an answer in memory.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len() > 1<<20 {
		return 0, errors.New("ha: readiness answer too long")
	}
	return r.body.Write(b)
}
