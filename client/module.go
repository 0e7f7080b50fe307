package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MaxModule caps the bytes of a plugin module the client accepts from the daemon (the size the
// daemon's registry reads at most).
const MaxModule = 256 << 20

// Module is a plugin's module as the daemon serves it.
type Module struct {
	// Wasm is the module's bytes; nil when Changed is false.
	Wasm []byte
	// Hash is the hex SHA-256 of the version in force (the answer's ETag), checked against
	// Wasm's own hash when Wasm is set.
	Hash string
	// Changed is false when the daemon answered 304: the version in force is still after.
	Changed bool
}

// Module fetches the module of plugin name's version in force (GET /v1/plugins/{name}/module).
// With after set to a hash it long-polls: the daemon answers as soon as the version in force
// differs from after, or, when wait passes first, answers Changed false. wait 0 with after set
// means the daemon's default wait (30 s). The bytes are checked against the ETag, so a module
// cut short or damaged on the way is an error, never returned.
func (c *Client) Module(ctx context.Context, name, after string, wait time.Duration) (*Module, error) {
	path := "/v1/plugins/" + seg(name) + "/module"
	q := url.Values{}
	timeout := c.timeout
	if after != "" {
		q.Set("after", after)
		if wait <= 0 {
			wait = 30 * time.Second
		}
		q.Set("wait", wait.String())
		timeout += wait
	}
	resp, err := c.send(ctx, http.MethodGet, path, q, nil, http.Header{"Accept": {"application/wasm"}}, timeout)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	etag := strings.Trim(resp.Header.Get("ETag"), `"`)
	switch {
	case resp.StatusCode == http.StatusNotModified:
		return &Module{Hash: etag}, nil
	case resp.StatusCode != http.StatusOK:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return nil, errorAnswer(http.MethodGet, path, resp.StatusCode, b)
	}
	if resp.ContentLength > MaxModule {
		return nil, fmt.Errorf("allocd: GET %s: module of %d bytes exceeds the %d-byte limit", path, resp.ContentLength, MaxModule)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxModule+1))
	if err != nil {
		return nil, fmt.Errorf("allocd: GET %s: reading the module: %w", path, err)
	}
	if len(b) > MaxModule {
		return nil, fmt.Errorf("allocd: GET %s: module exceeds the %d-byte limit", path, MaxModule)
	}
	if resp.ContentLength >= 0 && int64(len(b)) != resp.ContentLength {
		return nil, fmt.Errorf("allocd: GET %s: module cut short: %d of %d bytes", path, len(b), resp.ContentLength)
	}
	sum := sha256.Sum256(b)
	hash := hex.EncodeToString(sum[:])
	if etag != hash {
		return nil, fmt.Errorf("allocd: GET %s: module's hash %s does not match its ETag %q", path, hash[:12], etag)
	}
	return &Module{Wasm: b, Hash: hash, Changed: true}, nil
}

// errorAnswer turns a non-2xx answer into an *Error carrying the daemon's {"error":"..."} text.
func errorAnswer(method, path string, status int, body []byte) *Error {
	e := &Error{Method: method, Path: path, StatusCode: status, Message: strings.TrimSpace(string(body))}
	var eb struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &eb) == nil && eb.Error != "" {
		e.Message = eb.Error
	}
	return e
}
