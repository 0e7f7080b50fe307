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
	"time"
)

// DefaultTimeout bounds every request but long-polls, whose bound is their wait plus this.
const DefaultTimeout = 10 * time.Second

// maxResponse caps the bytes read from one answer; the largest (a group's status with every
// member and assignment) stays far below it.
const maxResponse = 64 << 20

// Client talks to one allocd daemon. It is safe for concurrent use, and is meant to be shared:
// every consumer and producer made from it uses its HTTP connections.
type Client struct {
	base    *url.URL
	http    *http.Client
	timeout time.Duration
	agent   string
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

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option { return func(c *Client) { c.agent = ua } }

// New returns a client of the daemon at baseURL, such as "http://127.0.0.1:7420" (a bare
// "host:port" means http). It does not contact the daemon; a malformed URL makes every call
// fail with the parse error.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{timeout: DefaultTimeout, agent: "allocd-go-client"}
	if !strings.Contains(baseURL, "://") {
		baseURL = "http://" + baseURL
	}
	if u, err := url.Parse(strings.TrimRight(baseURL, "/")); err == nil {
		c.base = u
	}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		c.http = &http.Client{Transport: defaultTransport()}
	}
	return c
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

// BaseURL is the daemon's address as the client uses it.
func (c *Client) BaseURL() string {
	if c.base == nil {
		return ""
	}
	return c.base.String()
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
	if c.base == nil {
		return errors.New("allocd: the client's base URL is not a valid URL")
	}
	if timeout <= 0 {
		timeout = c.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	target := c.base.String() + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("allocd: %s %s: encoding the request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return fmt.Errorf("allocd: %s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.agent != "" {
		req.Header.Set("User-Agent", c.agent)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("allocd: %s %s: %w", method, path, unwrapURLError(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("allocd: %s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		e := &Error{Method: method, Path: path, StatusCode: resp.StatusCode}
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
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("allocd: %s %s: decoding the answer: %w", method, path, err)
		}
	}
	return nil
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
