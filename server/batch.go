package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/allocd/allocd/coordinator"
)

// MaxHeartbeatBatch is the most heartbeats one POST /v1/heartbeats may carry.
const MaxHeartbeatBatch = 1000

// A heartbeat batch carries the heartbeats of several members, of one group or of several, in
// one request: POST /v1/heartbeats with {"heartbeats":[{"group":G,"heartbeat":H},...]}, each
// H the body of POST /v1/groups/G/heartbeat. Each is read and applied as that request would
// be, in order, and answered in the same place of {"answers":[...]}: {"status":200,
// "answer":A} with A what that request answers, or {"status":S,"error":E} with the status and
// the error text it would have had. A process running many members (the Go client batches
// the heartbeats its consumers send at the same moment) so pays one HTTP exchange for many:
// over HTTP/2 the exchange itself, not the heartbeat, was 86 % of the daemon's instructions
// (BENCHMARKS.md, "Heartbeats that share a request").
type heartbeatBatch struct {
	Heartbeats []batchedHeartbeat `json:"heartbeats"`
}

type batchedHeartbeat struct {
	Group     string          `json:"group"`
	Heartbeat json.RawMessage `json:"heartbeat"`
}

// batchedLatencyBuckets run 1, 2, 5 per decade, 100 us .. 20 s: a bound at 10 ms, the fleet's
// p99 goal, and no two bounds more than 2.5 apart.
var batchedLatencyBuckets = []float64{
	0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20,
}

func newBatchMetrics() (*prometheus.CounterVec, prometheus.Histogram) {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_http_batched_heartbeats_total",
			Help: "Heartbeats answered within POST /v1/heartbeats, by the status code each would have had alone.",
		}, []string{"code"}), prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "allocd_http_batched_heartbeat_seconds",
			Help:    "Latency of each heartbeat within POST /v1/heartbeats: from the request's arrival to its answer's.",
			Buckets: batchedLatencyBuckets,
		})
}

func (s *Server) heartbeats(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	body, err := readBody(r.Body)
	if err != nil {
		return err
	}
	var raw []batchedHeartbeat // when encoding/json read the body
	groups, hbs, fast := fastBatch(body)
	if !fast {
		var req heartbeatBatch
		if err := decodeBody(body, &req); err != nil {
			return err
		}
		groups = make([]string, len(req.Heartbeats))
		for i, item := range req.Heartbeats {
			groups[i] = item.Group
		}
		if len(req.Heartbeats) > MaxHeartbeatBatch {
			return badRequest("%d heartbeats in one request, more than %d", len(req.Heartbeats), MaxHeartbeatBatch)
		}
		raw = req.Heartbeats
	}
	b := make([]byte, 0, 64+200*len(groups))
	b = append(b, `{"answers":[`...)
	for i, group := range groups {
		if i > 0 {
			b = append(b, ',')
		}
		var a coordinator.Assignment
		var err error
		if fast {
			a, err = s.batchedHeartbeat(group, hbs[i], true, nil)
		} else {
			a, err = s.batchedHeartbeat(group, coordinator.Heartbeat{}, false, raw[i].Heartbeat)
		}
		var status int
		if b, status, err = s.appendItem(b, a, err, "heartbeat", group); err != nil {
			return err
		}
		s.batched.WithLabelValues(strconv.Itoa(status)).Inc()
		s.batchedSeconds.Observe(time.Since(start).Seconds())
	}
	b = append(b, "]}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, err = w.Write(b)
	return err
}

// batchedHeartbeat applies one heartbeat of a batch as heartbeatOf does: hb as fastBatch read
// it (read), or else raw, its JSON, read as a heartbeat request's body.
func (s *Server) batchedHeartbeat(group string, hb coordinator.Heartbeat, read bool, raw json.RawMessage) (coordinator.Assignment, error) {
	if err := coordinator.CheckName("group", group); err != nil {
		return coordinator.Assignment{}, err
	}
	if !read {
		if len(raw) == 0 || string(raw) == "null" {
			return coordinator.Assignment{}, badRequest("request body is empty; want a JSON object")
		}
		var err error
		if hb, err = decodeHeartbeat(bytes.NewReader(raw)); err != nil {
			return coordinator.Assignment{}, err
		}
	} else if err := hb.Check(); err != nil {
		return coordinator.Assignment{}, err
	}
	return s.c.Heartbeat(group, hb)
}

// appendItem appends one answer of a batch: {"status":200,"answer":a} when err is nil, else
// {"status":S,"error":E} with the status and text err would have had alone (a 5xx logged as a
// failed batched what of group). It returns the status; an error only when even that could not
// be written.
func (s *Server) appendItem(b []byte, a coordinator.Assignment, err error, what, group string) ([]byte, int, error) {
	if err == nil {
		mark := len(b)
		b = append(b, `{"status":200,"answer":`...)
		var ok bool
		if b, ok = appendAssignment(b, a); ok {
			return append(b[:len(b)-1], '}'), http.StatusOK, nil // appendAssignment's newline
		}
		b = b[:mark]
		if err = s.appendAnswer(&b, http.StatusOK, a); err == nil {
			return b, http.StatusOK, nil
		}
	}
	status := statusOf(err)
	if status >= 500 {
		s.log.Error().Err(err).Str("group", group).Int("status", status).Msg("batched " + what + " failed")
	}
	return b, status, s.appendAnswer(&b, status, err.Error())
}

// appendAnswer appends one answer of a batch through encoding/json: {"status":200,"answer":v}
// or, for another status, {"status":S,"error":v}.
func (s *Server) appendAnswer(b *[]byte, status int, v any) error {
	var enc []byte
	var err error
	if status == http.StatusOK {
		enc, err = encodeAny(struct {
			Status int `json:"status"`
			Answer any `json:"answer"`
		}{status, v})
	} else {
		enc, err = encodeAny(struct {
			Status int `json:"status"`
			Error  any `json:"error"`
		}{status, v})
	}
	if err != nil {
		return err
	}
	*b = append(*b, bytes.TrimSuffix(enc, []byte("\n"))...)
	return nil
}
