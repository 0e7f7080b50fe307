package server

import (
	"github.com/allocd/allocd/coordinator"
)

// fastHeartbeat reads a heartbeat body in the shape clients write it (the Go client's, and any
// that writes plain JSON): an object of the fields cid, topics, instanceId, labels, generations
// and confirms, each at most once and spelt exactly so, strings without escapes, integers
// without fraction or exponent. It answers ok only when it read the whole body; for anything
// else (an escape, another key or another spelling, offsets, a duplicate key, a number it does
// not read, a syntax error) it answers false and encoding/json reads the body instead, with
// its rules and its error messages. For every body it accepts, encoding/json gives the same
// Heartbeat (FuzzFastHeartbeat).
//
// Why: the heartbeat is the daemon's most frequent request, and a fleet profile put a third of
// the daemon's CPU in decoding it with encoding/json and in growing the handler's stack for
// encoding/json's frames (RATIONALE.md).
func fastHeartbeat(body []byte) (hb coordinator.Heartbeat, ok bool) {
	p := jsonScanner{b: body}
	if hb, ok = p.heartbeat(); !ok {
		return hb, false
	}
	return hb, p.end()
}

// heartbeat reads a heartbeat object as fastHeartbeat accepts it.
func (p *jsonScanner) heartbeat() (hb coordinator.Heartbeat, ok bool) {
	if !p.byte('{') {
		return hb, false
	}
	var seen uint8
	if p.byte('}') {
		return hb, true
	}
	for {
		key, ok := p.str()
		if !ok || !p.byte(':') {
			return hb, false
		}
		var bit uint8
		switch key {
		case "cid":
			bit = 1
			hb.CID, ok = p.strOrNull()
		case "topics":
			bit = 2
			hb.Topics, ok = p.strings()
		case "instanceId":
			bit = 4
			hb.InstanceID, ok = p.strOrNull()
		case "labels":
			bit = 8
			hb.Labels, ok = p.labels()
		case "generations":
			bit = 16
			hb.Generations, ok = p.generations()
		case "confirms":
			bit = 32
			hb.Confirms, ok = p.boolean()
		default:
			return hb, false
		}
		if !ok || seen&bit != 0 {
			return hb, false
		}
		seen |= bit
		if p.byte('}') {
			return hb, true
		}
		if !p.byte(',') {
			return hb, false
		}
	}
}

// fastBatch reads a heartbeat batch in the shape the Go client writes it:
// {"heartbeats":[{"group":G,"heartbeat":H},...]}, each G a string fastHeartbeat's scanner
// reads and each H a heartbeat fastHeartbeat accepts, the keys in that order. Like
// fastHeartbeat it answers false for anything else, which encoding/json then reads; for
// every body it accepts, encoding/json and fastHeartbeat give the same heartbeats
// (FuzzFastBatch).
func fastBatch(body []byte) (groups []string, hbs []coordinator.Heartbeat, ok bool) {
	p := jsonScanner{b: body}
	if !p.byte('{') || !p.key("heartbeats") || !p.byte('[') {
		return nil, nil, false
	}
	groups, hbs = []string{}, []coordinator.Heartbeat{}
	if p.byte(']') {
		return groups, hbs, p.byte('}') && p.end()
	}
	for {
		if !p.byte('{') || !p.key("group") {
			return nil, nil, false
		}
		g, ok := p.str()
		if !ok || !p.byte(',') || !p.key("heartbeat") {
			return nil, nil, false
		}
		hb, ok := p.heartbeat()
		if !ok || !p.byte('}') || len(hbs) == MaxHeartbeatBatch {
			return nil, nil, false
		}
		groups, hbs = append(groups, g), append(hbs, hb)
		if p.byte(']') {
			return groups, hbs, p.byte('}') && p.end()
		}
		if !p.byte(',') {
			return nil, nil, false
		}
	}
}

// key reads "k": if it comes next.
func (p *jsonScanner) key(k string) bool {
	got, ok := p.str()
	return ok && got == k && p.byte(':')
}

// jsonScanner reads the subset of JSON that fastHeartbeat accepts. Each method skips the
// whitespace before what it reads and answers false on anything outside the subset.
type jsonScanner struct {
	b []byte
	i int
}

func (p *jsonScanner) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte reads c if it comes next.
func (p *jsonScanner) byte(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether nothing but whitespace is left.
func (p *jsonScanner) end() bool {
	p.space()
	return p.i == len(p.b)
}

// word reads the literal w (null, true, false) if it comes next.
func (p *jsonScanner) word(w string) bool {
	p.space()
	if len(p.b)-p.i >= len(w) && string(p.b[p.i:p.i+len(w)]) == w {
		p.i += len(w)
		return true
	}
	return false
}

// str reads a string without escapes or control characters. The body is valid UTF-8
// (checkUTF8 ran first), so its bytes are the string's.
func (p *jsonScanner) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, true
		case c == '\\' || c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// strOrNull reads a string, or null as "" (encoding/json leaves a string unchanged on null).
func (p *jsonScanner) strOrNull() (string, bool) {
	if p.word("null") {
		return "", true
	}
	return p.str()
}

func (p *jsonScanner) boolean() (bool, bool) {
	switch {
	case p.word("true"):
		return true, true
	case p.word("false"), p.word("null"):
		return false, true
	}
	return false, false
}

// strings reads an array of strings, or null as nil.
func (p *jsonScanner) strings() ([]string, bool) {
	if p.word("null") {
		return nil, true
	}
	if !p.byte('[') {
		return nil, false
	}
	out := []string{}
	if p.byte(']') {
		return out, true
	}
	for {
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		if p.byte(']') {
			return out, true
		}
		if !p.byte(',') {
			return nil, false
		}
	}
}

// object reads an object (or null: no call) whose keys are all distinct, calling value
// for each key to read its value. A repeated key is declined: encoding/json would merge it.
func (p *jsonScanner) object(value func(key string) bool) (isNull, ok bool) {
	if p.word("null") {
		return true, true
	}
	if !p.byte('{') {
		return false, false
	}
	if p.byte('}') {
		return false, true
	}
	for {
		k, ok := p.str()
		if !ok || !p.byte(':') || !value(k) {
			return false, false
		}
		if p.byte('}') {
			return false, true
		}
		if !p.byte(',') {
			return false, false
		}
	}
}

func (p *jsonScanner) labels() (map[string]string, bool) { return scanMap(p, p.str) }

func (p *jsonScanner) generations() (map[string]int64, bool) { return scanMap(p, p.int64) }

// scanMap reads an object of distinct keys whose values read reads, or null as nil.
func scanMap[V any](p *jsonScanner, read func() (V, bool)) (map[string]V, bool) {
	m := map[string]V{}
	isNull, ok := p.object(func(k string) bool {
		if _, dup := m[k]; dup {
			return false
		}
		v, ok := read()
		m[k] = v
		return ok
	})
	if isNull {
		return nil, ok
	}
	return m, ok
}

// int64 reads an integer in JSON's syntax (no leading zero, no fraction or exponent) that
// fits in 18 digits, so that it cannot overflow.
func (p *jsonScanner) int64() (int64, bool) {
	p.space()
	neg := p.i < len(p.b) && p.b[p.i] == '-'
	if neg {
		p.i++
	}
	start := p.i
	var n int64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		n = n*10 + int64(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 18 || digits > 1 && p.b[start] == '0' {
		return 0, false
	}
	if p.i < len(p.b) {
		if c := p.b[p.i]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}
