package server

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/allocd/allocd/coordinator"
)

// historyQuery is the query of GET /v1/groups/{group}/history and /explain.
type historyQuery struct {
	topic      string
	limit      int
	before     int64
	brokerName string
	queueID    int32
}

// parseHistory reads topic (required), limit and before.
func parseHistory(q url.Values) (historyQuery, error) {
	h := historyQuery{topic: q.Get("topic")}
	if err := coordinator.CheckName("topic", h.topic); err != nil {
		return h, badRequest("query parameter topic: %v", err)
	}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > coordinator.MaxHistoryPage {
			return h, badRequest("query parameter limit=%q is not an integer in [1, %d]", q.Get("limit"), coordinator.MaxHistoryPage)
		}
		h.limit = n
	}
	if q.Has("before") {
		n, err := strconv.ParseInt(q.Get("before"), 10, 64)
		if err != nil || n < 1 {
			return h, badRequest("query parameter before=%q is not a generation number (an integer >= 1)", q.Get("before"))
		}
		h.before = n
	}
	return h, nil
}

// parseExplain reads topic, brokerName and queueId, all required.
func parseExplain(q url.Values) (historyQuery, error) {
	h := historyQuery{topic: q.Get("topic"), brokerName: q.Get("brokerName")}
	if err := coordinator.CheckName("topic", h.topic); err != nil {
		return h, badRequest("query parameter topic: %v", err)
	}
	if h.brokerName == "" {
		return h, badRequest("query parameter brokerName is required")
	}
	n, err := strconv.ParseInt(q.Get("queueId"), 10, 32)
	if err != nil || n < 0 || n >= coordinator.MaxQueues {
		return h, badRequest("query parameter queueId=%q is not a queue id (an integer in [0, %d))", q.Get("queueId"), coordinator.MaxQueues)
	}
	h.queueID = int32(n)
	return h, nil
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) error {
	q, err := parseHistory(r.URL.Query())
	if err != nil {
		return err
	}
	h, err := s.c.History(r.PathValue("group"), q.topic, q.limit, q.before)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, h)
}

func (s *Server) explain(w http.ResponseWriter, r *http.Request) error {
	q, err := parseExplain(r.URL.Query())
	if err != nil {
		return err
	}
	ex, err := s.c.Explain(r.PathValue("group"), q.topic, q.brokerName, q.queueID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ex)
}
