package server

import "net/http"

// Waiting is the number of long-polls blocked on a change.
func (s *Server) Waiting() int64 { return s.waiting.Load() }

// HeartbeatGroup is heartbeatGroup, the heartbeat's route without the mux.
var HeartbeatGroup = heartbeatGroup

// Mux is the server's mux alone, without the heartbeat's route beside it.
func (s *Server) Mux() http.Handler { return s.handler.(*apiHandler).mux }
