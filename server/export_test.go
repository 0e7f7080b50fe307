package server

// Waiting is the number of long-polls blocked on a change.
func (s *Server) Waiting() int64 { return s.waiting.Load() }
