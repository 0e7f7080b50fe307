package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/rs/zerolog"
)

// mutexProfileFraction is the mutex profile's sampling while the debug listener is on: one
// contention event in 100.
const mutexProfileFraction = 100

// serveDebug serves Go's runtime profiles (net/http/pprof, under /debug/pprof/) on their own
// listener, apart from the API: an operator can profile a daemon under load
// (`go tool pprof http://ADDR/debug/pprof/profile?seconds=20`) without exposing the profiles
// where the API is reachable. It is off unless --debug-listen is set; with it, the mutex
// profile (/debug/pprof/mutex) samples one contended lock in mutexProfileFraction. The returned
// function stops it.
func serveDebug(addr string, log zerolog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-listen %s: %w", addr, err)
	}
	runtime.SetMutexProfileFraction(mutexProfileFraction)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// A CPU profile or trace writes after its ?seconds= (at most an hour here).
		WriteTimeout: time.Hour,
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Str("addr", ln.Addr().String()).Msg("debug listener stopped")
		}
	}()
	log.Warn().Str("debugAddr", ln.Addr().String()).Msg("serving Go profiles under /debug/pprof/ (--debug-listen); keep this address private")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	}, nil
}
