package server

import (
	"maps"
	"slices"
	"strconv"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/coordinator"
)

// appendAssignment appends a as encodeAny writes it (encoding/json, no HTML escaping, a
// newline at the end), and reports false, having written nothing worth keeping, when a holds a
// string that is not plain printable ASCII: encodeAny writes that one. Every heartbeat and every
// woken long-poll answers an Assignment; encoding/json's reflection and its sort of the maps'
// keys (whose frames grow each handler goroutine's stack) were a sixth of the daemon's CPU in a
// fleet profile (RATIONALE.md). TestAppendAssignmentIsEncodingJSON holds the bytes equal.
func appendAssignment(b []byte, a coordinator.Assignment) ([]byte, bool) {
	b = append(b, `{"generations":`...)
	b, ok := appendMap(b, a.Generations, func(b []byte, n int64) ([]byte, bool) { return strconv.AppendInt(b, n, 10), true })
	if !ok {
		return b, false
	}
	b = append(b, `,"assignment":`...)
	if b, ok = appendMap(b, a.Queues, appendQueues); !ok {
		return b, false
	}
	if a.Lost {
		b = append(b, `,"lost":true`...)
	}
	return append(b, "}\n"...), true
}

// appendMap appends m (null when nil) with its keys sorted, as encoding/json does, each value
// by value.
func appendMap[V any](b []byte, m map[string]V, value func([]byte, V) ([]byte, bool)) ([]byte, bool) {
	if m == nil {
		return append(b, "null"...), true
	}
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) { // encoding/json's order
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendPlain(b, k); !ok {
			return b, false
		}
		b = append(b, ':')
		if b, ok = value(b, m[k]); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

func appendQueues(b []byte, qs []abi.Queue) ([]byte, bool) {
	if qs == nil {
		return append(b, "null"...), true
	}
	b = append(b, '[')
	for i, q := range qs {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		b = append(b, `{"topic":`...)
		if b, ok = appendPlain(b, q.Topic); !ok {
			return b, false
		}
		b = append(b, `,"brokerName":`...)
		if b, ok = appendPlain(b, q.BrokerName); !ok {
			return b, false
		}
		b = append(b, `,"queueId":`...)
		b = strconv.AppendInt(b, int64(q.QueueID), 10)
		b = append(b, '}')
	}
	return append(b, ']'), true
}

// appendPlain appends s quoted if every byte is printable ASCII other than '"' and '\\', which
// encoding/json writes as they are.
func appendPlain(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}
