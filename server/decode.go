package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/allocd/allocd/coordinator"
)

// apiError is an error with the HTTP status that reports it.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// decode reads exactly one JSON object of known fields into v. The body must be valid UTF-8
// with no lone surrogate escapes: encoding/json would turn either into U+FFFD, so "c\xffx" and
// "c\xfex" would become one client id.
func decode(r io.Reader, v any) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeBody(body, v)
}

// readBody reads a request body, which must be UTF-8.
func readBody(r io.Reader) ([]byte, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, bodyError(err)
	}
	if err := checkUTF8(body); err != nil {
		return nil, err
	}
	return body, nil
}

// decodeBody is decode on a body readBody read.
func decodeBody(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err != nil {
			return bodyError(err)
		}
		return badRequest("request body has data after its JSON value")
	}
	return nil
}

// checkUTF8 refuses a body that is not valid UTF-8, or whose strings escape half of a
// surrogate pair (\ud800 alone): JSON text is UTF-8, and a lone surrogate names no character.
func checkUTF8(body []byte) error {
	if !utf8.Valid(body) {
		off := 0
		for off < len(body) {
			r, n := utf8.DecodeRune(body[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return badRequest("request body is not valid UTF-8 (byte %d)", off)
	}
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(body):
			i++
			if body[i] != 'u' {
				continue
			}
			r, ok := hex4(body, i+1)
			if !ok {
				continue // the decoder reports the bad escape
			}
			i += 4
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return badRequest("request body has a lone surrogate escape \\u%04x (byte %d)", r, i-5)
			case r >= 0xD800 && r <= 0xDBFF:
				low, ok := rune(0), false
				if i+2 < len(body) && body[i+1] == '\\' && body[i+2] == 'u' {
					low, ok = hex4(body, i+3)
				}
				if !ok || low < 0xDC00 || low > 0xDFFF {
					return badRequest("request body has a lone surrogate escape \\u%04x (byte %d)", r, i-5)
				}
				i += 6
			}
		}
	}
	return nil
}

// hex4 reads the four hex digits of a \u escape at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 32)
	return rune(v), err == nil
}

// bodyError turns encoding/json's errors into messages that name the field and the problem
// without Go type names.
func bodyError(err error) error {
	var (
		maxErr    *http.MaxBytesError
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &maxErr):
		return &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body exceeds %d bytes", maxErr.Limit)}
	case errors.Is(err, io.EOF):
		return badRequest("request body is empty; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("request body ends inside a JSON value")
	case errors.As(err, &syntaxErr):
		return badRequest("request body is not valid JSON (byte %d): %s", syntaxErr.Offset, strings.TrimPrefix(syntaxErr.Error(), "json: "))
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return badRequest("request body is JSON %s, want an object", typeErr.Value)
		}
		return badRequest("field %q: JSON %s where %s is wanted", field, typeErr.Value, jsonKind(typeErr.Type.String()))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest("invalid request body: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "map["):
		return "an object"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "string", strings.HasSuffix(goType, ".Model"), strings.HasSuffix(goType, ".Delivery"):
		return "a string"
	case goType == "bool":
		return "a boolean"
	}
	return "an object"
}

// topicRequest is the body of PUT /v1/topics/{topic}.
type topicRequest struct {
	Brokers []coordinator.Broker `json:"brokers"`
	// Autoscale is the policy, read by coordinator.ParsePolicy (defaults for missing fields).
	Autoscale json.RawMessage `json:"autoscale"`
}

// leaveRequest is the body of POST /v1/groups/{group}/leave.
type leaveRequest struct {
	CID string `json:"cid"`
}

func decodeTopic(r io.Reader) (topicRequest, error) {
	var t topicRequest
	return t, decode(r, &t)
}

func decodeBinding(r io.Reader) (coordinator.Binding, error) {
	var b coordinator.Binding
	return b, decode(r, &b)
}

func decodeHeartbeat(r io.Reader) (coordinator.Heartbeat, error) {
	body, err := readBody(r)
	if err != nil {
		return coordinator.Heartbeat{}, err
	}
	hb, ok := fastHeartbeat(body)
	if !ok {
		hb = coordinator.Heartbeat{}
		if err := decodeBody(body, &hb); err != nil {
			return hb, err
		}
	}
	return hb, hb.Check()
}

func decodeLeave(r io.Reader) (leaveRequest, error) {
	var l leaveRequest
	if err := decode(r, &l); err != nil {
		return l, err
	}
	return l, coordinator.CheckID("cid", l.CID)
}

// pollQuery is the query of GET /v1/groups/{group}/assignment.
type pollQuery struct {
	cid    string
	topics []string // nil: the member's own
	after  int64    // -1: answer at once
	wait   time.Duration
}

// parsePoll reads cid, topic (repeatable), after and wait. Without after the answer is
// immediate; with it the wait defaults to defaultWait. wait is capped at maxWait rather than
// refused, so a client asking for more just gets an answer sooner.
func parsePoll(q url.Values, defaultWait, maxWait time.Duration) (pollQuery, error) {
	p := pollQuery{cid: q.Get("cid"), after: -1}
	if err := coordinator.CheckID("cid", p.cid); err != nil {
		return p, badRequest("query parameter %v", err)
	}
	if ts, ok := q["topic"]; ok {
		p.topics = []string{}
		for _, t := range ts {
			if err := coordinator.CheckName("topic", t); err != nil {
				return p, err
			}
			p.topics = append(p.topics, t)
		}
	}
	if q.Has("after") {
		n, err := strconv.ParseInt(q.Get("after"), 10, 64)
		if err != nil || n < 0 {
			return p, badRequest("query parameter after=%q is not a generation number (an integer >= 0)", q.Get("after"))
		}
		p.after = n
	}
	var err error
	p.wait, err = pollWait(q.Has("after"), q.Has("wait"), q.Get("wait"), defaultWait, maxWait)
	return p, err
}

// pollWait is a long-poll's wait: none without after (it answers at once), defaultWait with it,
// or the wait given (parseWait); capped at maxWait rather than refused, so a client asking for
// more just gets an answer sooner.
func pollWait(after, given bool, wait string, defaultWait, maxWait time.Duration) (time.Duration, error) {
	var d time.Duration
	if after {
		d = defaultWait
	}
	if given {
		var err error
		if d, err = parseWait(wait); err != nil {
			return 0, err
		}
	}
	return min(d, maxWait), nil
}

// parseWait accepts a Go duration ("30s", "1500ms") or a number of seconds ("30").
func parseWait(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, badRequest("query parameter wait=%q is negative", s)
		}
		return time.Duration(min(n, int64(time.Hour/time.Second))) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, badRequest("query parameter wait=%q is not a duration (such as 30s) or a number of seconds", s)
	}
	if d < 0 {
		return 0, badRequest("query parameter wait=%q is negative", s)
	}
	return d, nil
}
