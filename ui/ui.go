// Package ui is the operators' web view of allocd, served by the daemon under /ui/: the groups,
// a group's members, queue owners, lag, locks and history, the plugins and the topics.
//
// Pages are rendered on the server with html/template from what the /v1 API answers: the UI
// calls the API's own http.Handler in process, so that it shows what curl would, and works
// unchanged on a replica that forwards /v1 to another. A small script (static/app.js) keeps a
// page live over server-sent events (GET /ui/events) and sends the admin actions to /v1 with
// fetch. Every asset is embedded; a page requests nothing from another host.
package ui

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Mode is what the UI offers: nothing, reading, or reading and the admin actions.
type Mode string

// The modes of --ui.
const (
	Off   Mode = "off"
	Read  Mode = "read"
	Admin Mode = "admin"
)

// ParseMode reads a --ui value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Off, Read, Admin:
		return m, nil
	}
	return "", fmt.Errorf("--ui %q: want off, read or admin", s)
}

// Defaults of Options.
const (
	DefaultPoll      = 250 * time.Millisecond
	DefaultMaxStream = 32
)

// Options set up the UI.
type Options struct {
	// API is the /v1 API's handler (required); every page reads through it.
	API http.Handler
	// Mode is Read or Admin (Off serves nothing: do not mount the UI).
	Mode Mode
	// Logger receives errors the pages meet.
	Logger zerolog.Logger
	// Poll is how often a live page's stream re-reads its data (DefaultPoll): a change shows
	// within about this long.
	Poll time.Duration
	// MaxStreams caps the live streams open at once (DefaultMaxStream); more are refused with
	// 503, and their pages fall back to reloading their fragment every few seconds.
	MaxStreams int
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// UI serves the pages under /ui/.
type UI struct {
	opts    Options
	pages   map[string]*template.Template
	static  http.Handler
	streams atomic.Int64
	mux     *http.ServeMux
	done    chan struct{}
	close   sync.Once
}

// Close ends the live streams (call it when the HTTP server shuts down: http.Server's
// RegisterOnShutdown), so that they do not hold the shutdown up.
func (u *UI) Close() { u.close.Do(func() { close(u.done) }) }

// New builds the UI.
func New(opts Options) (*UI, error) {
	if opts.API == nil {
		return nil, errors.New("ui: Options.API is required")
	}
	if opts.Mode != Read && opts.Mode != Admin {
		return nil, fmt.Errorf("ui: mode %q: want read or admin", opts.Mode)
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStream
	}
	u := &UI{opts: opts, pages: map[string]*template.Template{}, done: make(chan struct{})}
	for _, name := range []string{"groups", "group", "plugins", "topics", "error"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("ui: template %s: %w", name, err)
		}
		u.pages[name] = t
	}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	u.static = http.StripPrefix("/ui/static/", http.FileServerFS(sub))
	u.mux = http.NewServeMux()
	u.mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/groups", http.StatusFound)
	})
	u.mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/groups", http.StatusFound)
	})
	u.mux.HandleFunc("GET /ui/static/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		u.static.ServeHTTP(w, r)
	})
	u.mux.HandleFunc("GET /ui/events", u.events)
	u.mux.HandleFunc("GET /ui/", u.servePage)
	u.mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method "+r.Method+" not allowed on the UI; its actions go to /v1", http.StatusMethodNotAllowed)
	})
	return u, nil
}

// ServeHTTP serves /ui and everything under /ui/.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Nothing from another host; inline scripts refused (hostile names cannot run).
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	u.mux.ServeHTTP(w, r)
}

// Mount serves the UI under /ui/ and api everywhere else; GET / goes to the UI.
func Mount(api http.Handler, u *UI) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/ui" || strings.HasPrefix(p, "/ui/"):
			u.ServeHTTP(w, r)
		case p == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			http.Redirect(w, r, "/ui/", http.StatusFound)
		default:
			api.ServeHTTP(w, r)
		}
	})
}

// apiError is an error answer of the API.
type apiError struct {
	status int
	path   string
	msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("GET %s: %d %s", e.path, e.status, e.msg) }

// recorder keeps an in-process API answer.
type recorder struct {
	h    http.Header
	code int
	buf  bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.buf.Write(b)
}
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

// get asks the API for path and decodes its JSON answer into v.
func (u *UI) get(r *http.Request, path string, v any) error {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	req.RemoteAddr = r.RemoteAddr
	req.Header.Set("Accept", "application/json")
	if f := r.Header.Get("X-Forwarded-For"); f != "" {
		req.Header.Set("X-Forwarded-For", f)
	}
	rec := &recorder{h: http.Header{}}
	u.opts.API.ServeHTTP(rec, req)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	if rec.code >= 400 {
		var e struct{ Error string }
		msg := strings.TrimSpace(rec.buf.String())
		if json.Unmarshal(rec.buf.Bytes(), &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return &apiError{status: rec.code, path: path, msg: msg}
	}
	if err := json.Unmarshal(rec.buf.Bytes(), v); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}
