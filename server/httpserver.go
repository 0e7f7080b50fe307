package server

import "net/http"

// ConfigureHTTP sets the protocols the daemon serves on srv: HTTP/1.1 and HTTP/2 without TLS
// (h2c, prior knowledge), so that a process running many members can multiplex their
// heartbeats and long-polls over a few connections instead of holding one each (BENCHMARKS.md,
// "Fleets four times larger").
func ConfigureHTTP(srv *http.Server) {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Protocols = p
}
