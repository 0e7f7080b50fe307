package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/coordinator"
	queueroute "github.com/allocd/allocd/route"
)

func (s *Server) listTopics(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, struct {
		Topics []coordinator.Topic `json:"topics"`
	}{s.c.Topics()})
}

func (s *Server) putTopic(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("topic")
	if err := coordinator.CheckName("topic", name); err != nil {
		return err
	}
	req, err := decodeTopic(r.Body)
	if err != nil {
		return err
	}
	policy, err := coordinator.ParsePolicy(req.Autoscale)
	if err != nil {
		return err
	}
	t, created, err := s.c.PutTopicAutoscale(name, req.Brokers, policy)
	if err != nil {
		return err
	}
	return writeJSON(w, createdOrOK(created), t)
}

func createdOrOK(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

func (s *Server) getTopic(w http.ResponseWriter, r *http.Request) error {
	t, err := s.c.TopicView(r.PathValue("topic"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, t)
}

func (s *Server) deleteTopic(w http.ResponseWriter, r *http.Request) error {
	if err := s.c.DeleteTopic(r.PathValue("topic")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// routeResponse lists a topic's writable queues; with a key, also the queue it maps to.
type routeResponse struct {
	Topic  string      `json:"topic"`
	Queues []abi.Queue `json:"queues"`
	Key    *string     `json:"key,omitempty"`
	Queue  *abi.Queue  `json:"queue,omitempty"`
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) error {
	topic := r.PathValue("topic")
	qs, err := s.c.Route(topic)
	if err != nil {
		return err
	}
	resp := routeResponse{Topic: topic, Queues: qs}
	if q := r.URL.Query(); q.Has("key") {
		key := q.Get("key")
		chosen, ok := queueroute.ShardQueue(qs, key)
		if !ok {
			return &apiError{status: http.StatusConflict, msg: "topic " + strconv.Quote(topic) + " has no writable queues"}
		}
		resp.Key, resp.Queue = &key, &chosen
	}
	return writeJSON(w, http.StatusOK, resp)
}

func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, struct {
		Groups []coordinator.GroupSummary `json:"groups"`
	}{s.c.Groups()})
}

func (s *Server) putGroup(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("group")
	if err := coordinator.CheckName("group", name); err != nil {
		return err
	}
	b, err := decodeBinding(r.Body)
	if err != nil {
		return err
	}
	g, created, err := s.c.PutGroup(name, b)
	if err != nil {
		return err
	}
	return writeJSON(w, createdOrOK(created), g)
}

func (s *Server) getGroup(w http.ResponseWriter, r *http.Request) error {
	g, err := s.c.Group(r.PathValue("group"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, g)
}

func (s *Server) deleteGroup(w http.ResponseWriter, r *http.Request) error {
	if err := s.c.DeleteGroup(r.PathValue("group")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	return s.heartbeatOf(w, r, r.PathValue("group"))
}

func (s *Server) heartbeatOf(w http.ResponseWriter, r *http.Request, group string) error {
	if err := coordinator.CheckName("group", group); err != nil {
		return err
	}
	hb, err := decodeHeartbeat(r.Body)
	if err != nil {
		return err
	}
	a, err := s.c.Heartbeat(group, hb)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, a)
}

func (s *Server) leave(w http.ResponseWriter, r *http.Request) error {
	group := r.PathValue("group")
	if err := coordinator.CheckName("group", group); err != nil {
		return err
	}
	req, err := decodeLeave(r.Body)
	if err != nil {
		return err
	}
	removed, err := s.c.Leave(group, req.CID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, struct {
		Removed bool `json:"removed"`
	}{removed})
}

// assignment is the long-poll: it answers at once when some generation is newer than after,
// otherwise when one changes, the wait ends, or the daemon shuts down. Every answer is the
// member's current assignment; a client sees from the numbers whether anything changed.
func (s *Server) assignment(w http.ResponseWriter, r *http.Request) error {
	group := r.PathValue("group")
	p, err := parsePoll(r.URL.Query(), s.opts.DefaultWait, s.opts.MaxWait)
	if err != nil {
		return err
	}
	timeout, stop := waitTimer(p.wait)
	defer stop()
	final := p.wait <= 0 || s.draining()
	for {
		a, changed, err := s.c.Poll(group, p.cid, p.topics)
		if err != nil {
			return err
		}
		if final || a.Newer(p.after) {
			return writeJSON(w, http.StatusOK, a)
		}
		if s.park(w, r, group, p, p.wait) {
			return nil
		}
		var gone bool
		if final, gone = s.await(r, changed, s.c.Done(), timeout); gone {
			return nil
		}
	}
}

// waitTimer is a long-poll's timeout: a channel that fires after d (never, for d <= 0), and the
// function that stops its timer.
func waitTimer(d time.Duration) (<-chan time.Time, func()) {
	if d <= 0 {
		return nil, func() {}
	}
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// await holds a long-poll until changed fires, or its timeout, the daemon's drain or done (when
// not nil) ends the wait, in which case the next answer is final; gone: the client went away.
func (s *Server) await(r *http.Request, changed, done <-chan struct{}, timeout <-chan time.Time) (final, gone bool) {
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	select {
	case <-changed:
		return false, false
	case <-timeout:
	case <-s.drain:
	case <-done:
	case <-r.Context().Done():
		return false, true
	}
	return true, false
}

func (s *Server) preview(w http.ResponseWriter, r *http.Request) error {
	group := r.PathValue("group")
	if err := coordinator.CheckName("group", group); err != nil {
		return err
	}
	b, err := decodeBinding(r.Body)
	if err != nil {
		return err
	}
	p, err := s.c.Preview(r.Context(), group, b)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

func (s *Server) listPlugins(w http.ResponseWriter, r *http.Request) error {
	var list any = []any{}
	if s.opts.Plugins != nil {
		list = s.opts.Plugins.List()
	}
	return writeJSON(w, http.StatusOK, struct {
		Plugins any `json:"plugins"`
	}{list})
}

func (s *Server) getPlugin(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if s.opts.Plugins != nil {
		if st, ok := s.opts.Plugins.Get(name); ok {
			return writeJSON(w, http.StatusOK, st)
		}
	}
	return &apiError{status: http.StatusNotFound, msg: "plugin " + strconv.Quote(name) + " not found"}
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, struct {
		Status string `json:"status"`
	}{"ok"})
}

// readyz answers 200 once the daemon serves: the store is open and the plugins are loaded
// (Options.Ready), and it is not shutting down. The restart grace does not make it unready:
// members must reach the daemon during the grace for it to end well. It is reported instead.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	if s.draining() {
		return &apiError{status: http.StatusServiceUnavailable, msg: "shutting down"}
	}
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			return &apiError{status: http.StatusServiceUnavailable, msg: "not ready: " + err.Error()}
		}
	}
	type grace struct {
		Until  time.Time `json:"until"`
		Active bool      `json:"active"`
	}
	resp := struct {
		Status   string   `json:"status"`
		Grace    *grace   `json:"restartGrace,omitempty"`
		Warnings []string `json:"warnings,omitempty"`
	}{Status: "ready"}
	if s.opts.Warnings != nil {
		resp.Warnings = s.opts.Warnings()
	}
	if until, active := s.c.Grace(); !until.IsZero() {
		resp.Grace = &grace{Until: until.UTC(), Active: active}
	}
	return writeJSON(w, http.StatusOK, resp)
}
