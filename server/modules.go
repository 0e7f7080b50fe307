package server

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Modules serves the bytes of the plugins' versions in force, for clients that run a strategy
// themselves (the strategy package's daemon source).
type Modules interface {
	// Module returns the bytes and content hash of plugin name's version in force; ok is false
	// when none serves.
	Module(name string) (wasm []byte, hash string, ok bool)
	// Changed returns a channel that is closed when any plugin's version in force next changes.
	Changed() <-chan struct{}
}

// moduleQuery is GET /v1/plugins/{name}/module's query: after=HASH[&wait=30s].
type moduleQuery struct {
	after string
	wait  time.Duration
}

// maxHashParam bounds after=: a content hash is 64 hex digits.
const maxHashParam = 128

func parseModuleQuery(q url.Values, defaultWait, maxWait time.Duration) (moduleQuery, error) {
	var m moduleQuery
	for k := range q {
		if k != "after" && k != "wait" {
			return m, badRequest("unknown query parameter %q (want after and wait)", k)
		}
	}
	if q.Has("after") {
		m.after = q.Get("after")
		if m.after == "" || len(m.after) > maxHashParam || strings.Trim(m.after, "0123456789abcdefABCDEF") != "" {
			return m, badRequest("query parameter after=%q is not a content hash (hex digits)", truncate(m.after, 80))
		}
		m.after = strings.ToLower(m.after)
		m.wait = defaultWait
	}
	if q.Has("wait") {
		if !q.Has("after") {
			return m, badRequest("query parameter wait needs after=HASH, the version to wait past")
		}
		d, err := parseWait(q.Get("wait"))
		if err != nil {
			return m, err
		}
		m.wait = d
	}
	m.wait = min(m.wait, maxWait)
	return m, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// module answers the module of plugin name's version in force (application/wasm, ETag its
// content hash). With after=HASH it long-polls: it answers at once when the version in force is
// not HASH, otherwise when it changes, or 304 Not Modified when the wait ends first or the
// daemon shuts down. If-None-Match with the current ETag also answers 304.
func (s *Server) module(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	q, err := parseModuleQuery(r.URL.Query(), s.opts.DefaultWait, s.opts.MaxWait)
	if err != nil {
		return err
	}
	if s.opts.Modules == nil {
		return &apiError{status: http.StatusNotFound, msg: "plugin " + strconv.Quote(name) + " not found (this daemon serves no modules)"}
	}
	timeout, stop := waitTimer(q.wait)
	defer stop()
	final := q.after == "" || q.wait <= 0 || s.draining()
	for {
		changed := s.opts.Modules.Changed() // before reading, so no change is missed
		wasm, hash, ok := s.opts.Modules.Module(name)
		if !ok {
			return &apiError{status: http.StatusNotFound, msg: "plugin " + strconv.Quote(name) + " not found (no version of it serves)"}
		}
		etag := `"` + hash + `"`
		if hash != q.after || final {
			w.Header().Set("ETag", etag)
			w.Header().Set("Cache-Control", "no-cache")
			if hash == q.after || r.Header.Get("If-None-Match") == etag {
				w.WriteHeader(http.StatusNotModified)
				return nil
			}
			w.Header().Set("Content-Type", "application/wasm")
			w.Header().Set("Content-Length", strconv.Itoa(len(wasm)))
			w.WriteHeader(http.StatusOK)
			if r.Method == http.MethodHead {
				return nil
			}
			_, err := w.Write(wasm)
			return err
		}
		var gone bool
		if final, gone = s.await(r, changed, nil, timeout); gone {
			return nil
		}
	}
}
