package server

import (
	"io"
	"net/http"

	"github.com/allocd/allocd/coordinator"
)

// offsetsRequest is the body of POST /v1/topics/{topic}/offsets: a group's committed offsets
// (and the max offsets its members read), or, without group, a broker's max offsets.
type offsetsRequest struct {
	Group   string                    `json:"group"`
	Offsets []coordinator.QueueOffset `json:"offsets"`
}

func decodeOffsets(r io.Reader) (offsetsRequest, error) {
	var req offsetsRequest
	if err := decode(r, &req); err != nil {
		return req, err
	}
	if req.Group != "" {
		if err := coordinator.CheckName("group", req.Group); err != nil {
			return req, err
		}
	}
	return req, nil
}

// reportOffsets answers the topic's autoscale status after the report, so a broker or an
// operator sees at once whether a queue still holds a shrink up.
func (s *Server) reportOffsets(w http.ResponseWriter, r *http.Request) error {
	topic := r.PathValue("topic")
	if err := coordinator.CheckName("topic", topic); err != nil {
		return err
	}
	req, err := decodeOffsets(r.Body)
	if err != nil {
		return err
	}
	status, err := s.c.ReportOffsets(topic, req.Group, req.Offsets)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, status)
}
