package abi

import "slices"

// Result status codes on the wire.
const (
	StatusOK    = 0
	StatusError = 1
)

// ResponseWriter builds a response in place, one result at a time, in target order. It is what a
// plugin uses: appending indices as it computes them allocates nothing per result. The zero value
// is an empty response, ready for Begin or Error.
type ResponseWriter struct {
	buf   []byte
	count int
	open  int // offset of the open result's header plus one; 0 when no result is open
}

// Reset starts a new response in buf's storage.
func (w *ResponseWriter) Reset(buf []byte) {
	w.buf = append(buf[:0], ResponseMagic...)
	w.buf = le.AppendUint16(w.buf, Major)
	w.buf = le.AppendUint16(w.buf, Minor)
	w.buf = le.AppendUint32(w.buf, 0)
	w.buf = le.AppendUint32(w.buf, 0)
	w.count, w.open = 0, 0
}

// start writes the header into a writer that has none yet (the zero value).
func (w *ResponseWriter) start() {
	if len(w.buf) < headerSize {
		w.Reset(w.buf)
	}
}

// Begin opens the next result, which Append extends.
func (w *ResponseWriter) Begin() {
	w.start()
	w.close()
	w.open = len(w.buf) + 1
	w.buf = le.AppendUint32(w.buf, StatusOK)
	w.buf = le.AppendUint32(w.buf, 0)
	w.count++
}

// Append adds queue index i to the open result.
func (w *ResponseWriter) Append(i int) { w.buf = le.AppendUint32(w.buf, uint32(i)) }

// Indices writes a whole result.
func (w *ResponseWriter) Indices(list []int) {
	w.start()
	w.close()
	n := len(w.buf)
	w.buf = slices.Grow(w.buf, 8+4*len(list))[:n+8+4*len(list)]
	out := w.buf[n:]
	le.PutUint32(out, StatusOK)
	le.PutUint32(out[4:], uint32(len(list)))
	out = out[8:]
	for k, i := range list {
		le.PutUint32(out[4*k:4*k+4], uint32(i))
	}
	w.count++
	w.open = n + 1 // as after Begin: Append may still extend this result
}

// Error writes a failed result with the plugin's message.
func (w *ResponseWriter) Error(msg string) {
	w.start()
	w.close()
	w.buf = le.AppendUint32(w.buf, StatusError)
	w.buf = le.AppendUint32(w.buf, uint32(len(msg)))
	w.buf = append(w.buf, msg...)
	for len(w.buf)%4 != 0 {
		w.buf = append(w.buf, 0)
	}
	w.count++
}

func (w *ResponseWriter) close() {
	if w.open > 0 {
		at := w.open - 1
		le.PutUint32(w.buf[at+4:], uint32((len(w.buf)-at-8)/4))
		w.open = 0
	}
}

// Bytes finishes the response and returns its encoding, which aliases the writer's storage.
func (w *ResponseWriter) Bytes() []byte {
	w.start()
	w.close()
	le.PutUint32(w.buf[8:], uint32(len(w.buf)))
	le.PutUint32(w.buf[12:], uint32(w.count))
	return w.buf
}

// EncodeResponse appends r's encoding to dst: the owner form when r.Owners is set, else the
// list form.
func EncodeResponse(dst []byte, r *Response) []byte {
	if r.Owners != nil {
		return AppendOwners(dst, r.Owners)
	}
	// The writer measures offsets and padding from the start of its buffer, so it writes into
	// dst's spare capacity; the append then copies nothing when that capacity sufficed.
	var w ResponseWriter
	w.Reset(dst[len(dst):])
	for _, res := range r.Results {
		if res.Failed {
			w.Error(res.Err)
		} else {
			w.Indices(res.Indices)
		}
	}
	return append(dst, w.Bytes()...)
}

// DecodeResponse decodes a response into r, reusing r's storage. It checks the structure only;
// Validate checks the answer against its request.
func DecodeResponse(b []byte, r *Response) error { return decodeResponse(b, r, false) }

// DecodeResponseShared is DecodeResponse for a caller that reads the answer while b is unchanged:
// an owner-form answer's Owners are b's own memory where b holds them as this machine stores an
// int32 (little-endian, 4-byte aligned, as a Go-allocated buffer is), so nothing is copied or
// allocated for them; elsewhere they are copied as DecodeResponse does. r.Owners is then valid
// only as long as b is, and must not be written.
func DecodeResponseShared(b []byte, r *Response) error { return decodeResponse(b, r, true) }

func decodeResponse(b []byte, r *Response, share bool) error {
	if len(b) < headerSize {
		return errorf("response of %d bytes is shorter than its %d-byte header", len(b), headerSize)
	}
	if string(b[:4]) == OwnersMagic {
		if r.Owners == nil {
			r.Owners = []int32{}
		}
		return decodeOwners(b, r, share)
	}
	if string(b[:4]) != ResponseMagic {
		return errorf("response magic %q, want %q or %q", b[:4], ResponseMagic, OwnersMagic)
	}
	r.Owners = nil
	if major := le.Uint16(b[4:]); major != Major {
		return errorf("response ABI major version %d, this reader speaks %d", major, Major)
	}
	if n := le.Uint32(b[8:]); uint64(n) != uint64(len(b)) {
		return errorf("response header says %d bytes, got %d", n, len(b))
	}
	count := uint64(le.Uint32(b[12:]))
	if count > uint64(len(b)-headerSize)/8 {
		return errorf("response declares %d results, more than its %d bytes can hold", count, len(b))
	}
	if uint64(cap(r.Results)) < count {
		r.Results = make([]Result, 0, count) // count fits: each result takes at least 8 bytes
	}
	r.Results = r.Results[:0]
	p := b[headerSize:]
	// All results' indices share one array, sized for the most the message can hold: one
	// allocation per answer instead of one per consumer.
	var flat []int
	for i := 0; i < int(count); i++ {
		if len(p) < 8 {
			return errorf("result %d is cut short", i)
		}
		status, n := le.Uint32(p), uint64(le.Uint32(p[4:]))
		p = p[8:]
		switch status {
		case StatusOK:
			if n*4 > uint64(len(p)) {
				return errorf("result %d declares %d indices, more than the %d bytes left", i, n, len(p))
			}
			if flat == nil {
				flat = make([]int, 0, len(p)/4)
			}
			start := len(flat)
			for j := uint64(0); j < n; j++ {
				flat = append(flat, int(le.Uint32(p[4*j:])))
			}
			r.Results = append(r.Results, Result{Indices: flat[start:len(flat):len(flat)]})
			p = p[4*n:]
		case StatusError:
			padded := (n + 3) &^ 3
			if padded > uint64(len(p)) {
				return errorf("result %d declares a %d-byte error, more than the %d bytes left", i, n, len(p))
			}
			r.Results = append(r.Results, Result{Err: string(p[:n]), Failed: true})
			p = p[padded:]
		default:
			return errorf("result %d has unknown status %d", i, status)
		}
	}
	if len(p) != 0 {
		return errorf("response has %d bytes after its last result", len(p))
	}
	return nil
}

// ValidateFor is the answer check of a plugin described by info: Validate, or, when the plugin
// declares PropOverlapping and answers in the list form, only one result per target and every index inside [0, numQueues).
// The host runs it on every answer, and the harness reuses it, so both judge a plugin by one rule.
func ValidateFor(info *Info, r *Request, resp *Response) error {
	if info == nil || !info.Has(PropOverlapping) || resp.Owners != nil {
		return Validate(r, resp)
	}
	n := r.NumTargets()
	if len(resp.Results) != n {
		return errorf("answer has %d results for %d consumers", len(resp.Results), n)
	}
	for t, res := range resp.Results {
		for _, q := range res.Indices {
			if q < 0 || q >= len(r.Queues) {
				return errorf("queue index %d for consumer %q out of range [0,%d)", q, r.Target(t), len(r.Queues))
			}
		}
	}
	return nil
}

// Validate checks an answer against its request: one result per target, every index inside
// [0, numQueues), no index twice in one result, and no queue given to two different consumer ids.
// (Two results for the same id, as a cidAll with a repeated id produces, may share queues.) The
// host runs it on every answer, and the harness reuses it, so both judge a plugin by one rule.
// An owner-form answer (resp.Owners set) must answer a whole-group request, name one owner per
// queue, each NoOwner or the first index of a consumer id; Validate then fills resp.Results.
func Validate(r *Request, resp *Response) error {
	if resp.Owners != nil {
		return resolveOwners(r, resp, firstOwners(r.Consumers))
	}
	n := r.NumTargets()
	if len(resp.Results) != n {
		return errorf("answer has %d results for %d consumers", len(resp.Results), n)
	}
	owner := make([]int32, len(r.Queues))
	for i := range owner {
		owner[i] = -1
	}
	for t, res := range resp.Results {
		if res.Failed {
			continue
		}
		cid := r.Target(t)
		for _, q := range res.Indices {
			if q < 0 || q >= len(r.Queues) {
				return errorf("queue index %d for consumer %q out of range [0,%d)", q, cid, len(r.Queues))
			}
			prev := owner[q]
			switch {
			case prev == int32(t):
				return errorf("queue %d (%s) given twice to consumer %q", q, r.Queues[q], cid)
			case prev >= 0 && r.Target(int(prev)) != cid:
				return errorf("queue %d (%s) given to both %q and %q", q, r.Queues[q], r.Target(int(prev)), cid)
			}
			owner[q] = int32(t)
		}
	}
	return nil
}

// Equal reports whether two responses carry the same results.
func (r *Response) Equal(o *Response) bool {
	if len(r.Results) != len(o.Results) {
		return false
	}
	for i, a := range r.Results {
		b := o.Results[i]
		if a.Failed != b.Failed || a.Err != b.Err || len(a.Indices) != len(b.Indices) {
			return false
		}
		for j := range a.Indices {
			if a.Indices[j] != b.Indices[j] {
				return false
			}
		}
	}
	return true
}
