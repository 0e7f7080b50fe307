package ui

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxStreamLife bounds one live stream; the page's EventSource reconnects at once.
const maxStreamLife = 5 * time.Minute

// events streams a page's live part (GET /ui/events?page=/ui/groups/g?topic=T): it re-reads
// the page's data every Options.Poll and sends the rendered fragment as a "live" event
// whenever it changed. Each stream is one goroutine and one in-process read of the page per
// poll; Options.MaxStreams bounds them.
func (u *UI) events(w http.ResponseWriter, r *http.Request) {
	target, err := url.Parse(r.URL.Query().Get("page"))
	if err != nil || !strings.HasPrefix(target.Path, "/ui/") || target.Host != "" || target.Scheme != "" {
		http.Error(w, "query parameter page must be the path of a page under /ui/", http.StatusBadRequest)
		return
	}
	if n := u.streams.Add(1); n > int64(u.opts.MaxStreams) {
		u.streams.Add(-1)
		w.Header().Set("Retry-After", "5")
		http.Error(w, fmt.Sprintf("too many live pages open (%d); this page is not live", u.opts.MaxStreams), http.StatusServiceUnavailable)
		return
	}
	defer u.streams.Add(-1)
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{}) // the server's WriteTimeout is for long-polls, not streams
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: 500\n\n")
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(u.opts.Poll)
	defer tick.Stop()
	life := time.NewTimer(maxStreamLife)
	defer life.Stop()
	q := target.Query()
	var last [sha256.Size]byte
	var buf, frame bytes.Buffer
	for first := true; ; first = false {
		buf.Reset()
		p, err := u.load(r, target.Path, q)
		if err != nil {
			p, _ = u.errorPage(p, target.Path, err)
		}
		if err := u.pages[p.Name].ExecuteTemplate(&buf, "live", p); err != nil {
			u.opts.Logger.Error().Err(err).Str("page", target.Path).Msg("ui: rendering a live page")
			return
		}
		if sum := sha256.Sum256(buf.Bytes()); first || sum != last {
			last = sum
			frame.Reset()
			frame.WriteString("event: live\n")
			for line := range bytes.Lines(buf.Bytes()) {
				frame.WriteString("data: ")
				frame.Write(bytes.TrimRight(line, "\r\n"))
				frame.WriteByte('\n')
			}
			frame.WriteByte('\n')
			if _, err := w.Write(frame.Bytes()); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
		select {
		case <-tick.C:
		case <-life.C:
			return
		case <-u.done:
			return
		case <-r.Context().Done():
			return
		}
	}
}
