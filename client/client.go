package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultTimeout bounds every request but long-polls, whose bound is their wait plus this.
const DefaultTimeout = 10 * time.Second

// maxResponse caps the bytes read from one answer; the largest (a group's status with every
// member and assignment) stays far below it.
const maxResponse = 64 << 20

// Client talks to an allocd daemon, or to the replicas of one on etcd: given several URLs, it
// sends each request to the replica that answered last, and on a connection error or a 503 (no
// leader yet, the leader unreachable) tries the next, so a failover costs retries, not errors.
// An answer naming the leader (the X-Allocd-Leader header) moves later requests to it, saving
// the proxy hop through a follower. It is safe for concurrent use, and is meant to be shared:
// every consumer and producer made from it uses its HTTP connections.
type Client struct {
	bases   []*url.URL // the daemon's replicas; one for a single daemon
	baseErr error      // why the URLs given are not usable
	cur     atomic.Int32
	// failover is how long a client of several replicas keeps trying when none answers (an
	// election running): DefaultFailoverWait unless set.
	failover time.Duration
	http     *http.Client
	timeout  time.Duration
	agent    string
	batch    batcher     // heartbeats sent together (batch.go)
	polls    pollBatcher // long-polls sent together (pollbatch.go)
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests through hc (a custom transport, TLS,
// proxies). hc.Timeout should be zero or longer than the long-poll wait; the client bounds each
// request itself.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithTimeout bounds each request but long-polls (DefaultTimeout); a long-poll is bounded by its
// wait plus this.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// DefaultFailoverWait is how long a client of several replicas keeps trying a request while
// none of them answers it (connection errors, 503 while they elect a leader): longer than a
// failover takes with the daemon's default session TTL (5 s), so a failover costs latency and
// no error.
const DefaultFailoverWait = 15 * time.Second

// WithFailoverWait sets how long a client of several replicas retries a request that none of
// them answers, pausing between rounds (DefaultFailoverWait; 0 or less: one round, no wait).
// Each attempt is still bounded by the request's timeout, and every wait by ctx.
func WithFailoverWait(d time.Duration) Option { return func(c *Client) { c.failover = max(d, 0) } }

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option { return func(c *Client) { c.agent = ua } }

// New returns a client of the daemon at baseURL, such as "http://127.0.0.1:7420" (a bare
// "host:port" means http), or of the replicas listed in it, comma-separated:
// "http://a:7420,http://b:7420,http://c:7420" (WithEndpoints adds more). It does not contact
// the daemon; a malformed URL makes every call fail with the parse error.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{timeout: DefaultTimeout, agent: "allocd-go-client", failover: DefaultFailoverWait}
	c.addEndpoints(strings.Split(baseURL, ","))
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		c.http = &http.Client{Transport: defaultTransport()}
	}
	if len(c.bases) == 0 && c.baseErr == nil {
		c.baseErr = errors.New("no daemon URL given")
	}
	return c
}

// WithEndpoints adds daemon replicas to those New was given (New's baseURL may be "" then).
func WithEndpoints(urls ...string) Option { return func(c *Client) { c.addEndpoints(urls) } }

func (c *Client) addEndpoints(urls []string) {
	for _, raw := range urls {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		if !strings.Contains(raw, "://") {
			raw = "http://" + raw
		}
		u, err := url.Parse(strings.TrimRight(raw, "/"))
		if err == nil && u.Host == "" {
			err = errors.New("no host")
		}
		if err != nil {
			if c.baseErr == nil {
				c.baseErr = fmt.Errorf("daemon URL %q: %w", raw, err)
			}
			continue
		}
		c.bases = append(c.bases, u)
	}
}

// defaultTransport is http.DefaultTransport with room for many idle connections to the one
// daemon: every consumer holds a long-poll and heartbeats beside it, and Go's default of two
// idle connections per host would open and close one for most requests.
func defaultTransport() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t = t.Clone()
	t.MaxIdleConns = 0 // no overall limit
	t.MaxIdleConnsPerHost = 256
	return t
}

// BaseURL is the address of the daemon (the replica) the client sends its next request to.
func (c *Client) BaseURL() string {
	if c.baseErr != nil {
		return ""
	}
	return c.bases[int(c.cur.Load())%len(c.bases)].String()
}

// Endpoints lists the daemon URLs the client was given, in order.
func (c *Client) Endpoints() []string {
	out := make([]string, len(c.bases))
	for i, u := range c.bases {
		out[i] = u.String()
	}
	return out
}

// leaderHeader names, on a replica's answer, the leader that computed it.
const leaderHeader = "X-Allocd-Leader"

// send sends one request, failing over among the replicas: on a connection error or a 503 it
// tries the next; when every replica failed, a client of several pauses and goes round again
// until its failover wait has passed, then returns the last failure. Each attempt is bounded
// by timeout; body is re-sent to each. The caller closes the answer's body.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body []byte, header http.Header, timeout time.Duration) (*http.Response, error) {
	if c.baseErr != nil {
		return nil, fmt.Errorf("allocd: %s %s: %w", method, path, c.baseErr)
	}
	var giveUp time.Time // set after the first round
	pause := failoverPause
	// A connection refused was never read by a daemon; any other failure may have taken
	// effect. The error returned keeps that apart: if some attempt may have reached a daemon,
	// the caller is not told that nothing happened.
	var lastErr, uncertain error
	failure := func() error {
		if uncertain != nil && errors.Is(lastErr, syscall.ECONNREFUSED) {
			return uncertain
		}
		return lastErr
	}
	for {
		start := int(c.cur.Load())
		for i := range len(c.bases) {
			n := (start + i) % len(c.bases)
			lastRound := len(c.bases) == 1 || c.failover <= 0 || (!giveUp.IsZero() && time.Now().Add(pause).After(giveUp))
			final := lastRound && i == len(c.bases)-1
			resp, err := c.attempt(ctx, c.bases[n], method, path, query, body, header, timeout)
			switch {
			case err != nil:
				lastErr = fmt.Errorf("allocd: %s %s: %w", method, path, unwrapURLError(err))
				if uncertain == nil && !errors.Is(err, syscall.ECONNREFUSED) {
					uncertain = lastErr
				}
				if ctx.Err() != nil || final {
					return nil, failure()
				}
				if errors.Is(err, context.DeadlineExceeded) && n == int(c.cur.Load()) {
					c.cur.Store(int32((n + 1) % len(c.bases))) // a replica that hangs: start elsewhere next time
				}
				continue
			case resp.StatusCode == http.StatusServiceUnavailable && !final:
				io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
				resp.Body.Close()
				lastErr = &Error{Method: method, Path: path, StatusCode: resp.StatusCode}
				if uncertain == nil {
					uncertain = lastErr
				}
				continue
			}
			c.cur.Store(int32(c.leaderIndex(resp.Header.Get(leaderHeader), n)))
			return resp, nil
		}
		if giveUp.IsZero() {
			giveUp = time.Now().Add(c.failover)
		}
		select {
		case <-ctx.Done():
			return nil, failure()
		case <-time.After(pause):
		}
		pause = min(pause*2, maxFailoverPause)
	}
}

// The pause between rounds of a failover, doubling up to the maximum.
const (
	failoverPause    = 50 * time.Millisecond
	maxFailoverPause = time.Second
)

// attempt sends one request to base; the answer's body, when there is one, ends the attempt's
// timeout when closed.
func (c *Client) attempt(ctx context.Context, base *url.URL, method, path string, query url.Values, body []byte, header http.Header, timeout time.Duration) (*http.Response, error) {
	target := base.String() + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	req, err := http.NewRequestWithContext(actx, method, target, rd)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header = header.Clone()
	if c.agent != "" {
		req.Header.Set("User-Agent", c.agent)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// leaderIndex is the index of the endpoint named leader, or else n.
func (c *Client) leaderIndex(leader string, n int) int {
	if leader == "" {
		return n
	}
	leader = strings.TrimRight(leader, "/")
	for i, u := range c.bases {
		if u.String() == leader {
			return i
		}
	}
	return n
}

// DefaultCID is a client id in RocketMQ's style, host@pid: unique per process on a host.
func DefaultCID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s@%d", host, os.Getpid())
}

// Error is an error answer of the daemon: its HTTP status and its {"error":"..."} text.
type Error struct {
	Method, Path string // the request, such as "PUT" and "/v1/topics/T"
	StatusCode   int
	Message      string // the daemon's error text, or the body when it was not JSON
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	return fmt.Sprintf("allocd: %s %s: %d %s", e.Method, e.Path, e.StatusCode, msg)
}

// StatusCode returns the HTTP status of err if it is (or wraps) an *Error, else 0.
func StatusCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// IsNotFound reports whether err is the daemon's 404: no such topic, group, member or plugin.
func IsNotFound(err error) bool { return StatusCode(err) == http.StatusNotFound }

// IsConflict reports whether err is the daemon's 409, such as a client id fenced by a restarted
// static member, or a route key on a topic without writable queues.
func IsConflict(err error) bool { return StatusCode(err) == http.StatusConflict }

// permanent reports whether retrying the same request cannot help: a 4xx other than a
// timeout or rate limit. Network errors and 5xx are transient.
func permanent(err error) bool {
	s := StatusCode(err)
	return s >= 400 && s < 500 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests
}

// do sends one request with a JSON body (if in is not nil) and decodes a 2xx answer into out
// (if not nil). timeout 0 means the client's.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = c.timeout
	}
	var body []byte
	header := http.Header{"Accept": {"application/json"}}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("allocd: %s %s: encoding the request: %w", method, path, err)
		}
		body = b
		header.Set("Content-Type", "application/json")
	}
	resp, err := c.send(ctx, method, path, query, body, header, timeout)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("allocd: %s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return answerError(method, path, resp.StatusCode, b)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("allocd: %s %s: decoding the answer: %w", method, path, err)
		}
	}
	return nil
}

// answerError is the *Error of an answer with status code status and body b: the daemon's
// {"error": ...} message, or else the body's text.
func answerError(method, path string, status int, b []byte) *Error {
	e := &Error{Method: method, Path: path, StatusCode: status}
	var eb struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &eb) == nil && eb.Error != "" {
		e.Message = eb.Error
	} else {
		e.Message = strings.TrimSpace(string(b))
	}
	return e
}

// unwrapURLError drops *url.Error's repetition of the method and URL, which the caller's
// message already names. errors.Is still finds a context's error.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err
	}
	return err
}

// seg escapes one path segment (names are validated by the daemon; this only keeps a bad
// name from changing the path).
func seg(s string) string { return url.PathEscape(s) }
