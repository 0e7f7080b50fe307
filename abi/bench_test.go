package abi_test

import (
	"fmt"
	"testing"

	"github.com/allocd/allocd/abi"
)

// benchRequest is the whole-group request of the benchmarks: 1024 queues of topic
// TopicTest (4 brokers x 256) and 64 consumers, in canonical order.
func benchRequest() *abi.Request {
	r := &abi.Request{Group: "please_rename_unique_group_name"}
	for _, broker := range []string{"broker-a", "broker-b", "broker-c", "broker-d"} {
		for id := range 256 {
			r.Queues = append(r.Queues, abi.Queue{Topic: "TopicTest", BrokerName: broker, QueueID: int32(id)})
		}
	}
	for i := range 64 {
		r.Consumers = append(r.Consumers, fmt.Sprintf("192.168.0.%d@%d", i, 1000+i))
	}
	abi.Canonicalize(r)
	return r
}

func BenchmarkEncodeRequest(b *testing.B) {
	r := benchRequest()
	var e abi.Encoder
	buf, _ := e.Encode(nil, r)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = e.Encode(buf[:0], r)
	}
}

func BenchmarkParseRequest(b *testing.B) {
	buf, _ := abi.EncodeRequest(nil, benchRequest())
	b.Run("parse", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := abi.ParseRequest(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What a strategy typically does next: read every queue and every target's index.
	b.Run("parse+read", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			v, _ := abi.ParseRequest(buf)
			for i := range v.NumQueues() {
				_ = v.Queue(i)
			}
			for i := range v.NumTargets() {
				_ = v.TargetIndex(i)
			}
		}
	})
}

func BenchmarkDecodeRequest(b *testing.B) {
	buf, _ := abi.EncodeRequest(nil, benchRequest())
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := abi.DecodeRequest(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeResponse decodes the whole group's answer to benchRequest: 64 results of 16
// indices each, into a reused Response, as the host does.
func BenchmarkDecodeResponse(b *testing.B) {
	var w abi.ResponseWriter
	for c := range 64 {
		w.Begin()
		for i := c * 16; i < (c+1)*16; i++ {
			w.Append(i)
		}
	}
	buf := w.Bytes()
	var r abi.Response
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if err := abi.DecodeResponse(buf, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	req := benchRequest()
	var resp abi.Response
	for c := range 64 {
		idx := make([]int, 16)
		for i := range idx {
			idx[i] = c*16 + i
		}
		resp.Results = append(resp.Results, abi.Result{Indices: idx})
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := abi.Validate(req, &resp); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHostSide is the host's share of a whole-group call of averagely on benchRequest,
// without the plugin: the request's order check and encoding, then decoding and checking the
// answer the plugin wrote. "list" is the 1.0 way (Canonicalize, Encode, a list-form answer
// through DecodeResponse and Validate), "owners" the 1.1 way (EncodeCanonical, the owner form).
func BenchmarkHostSide(b *testing.B) {
	r := benchRequest()
	n, c := len(r.Queues), len(r.Consumers)
	var list abi.ResponseWriter
	owners := make([]int32, n)
	for self := range c {
		list.Begin()
		for q := self * n / c; q < (self+1)*n/c; q++ {
			list.Append(q)
			owners[q] = int32(self)
		}
	}
	answers := map[string][]byte{"list": list.Bytes(), "owners": abi.AppendOwners(nil, owners)}
	for _, form := range []string{"list", "owners"} {
		b.Run(form, func(b *testing.B) {
			var e abi.Encoder
			var buf []byte
			var err error
			b.ReportAllocs()
			for b.Loop() {
				if form == "list" {
					abi.Canonicalize(r)
					buf, err = e.Encode(buf[:0], r)
				} else {
					buf, err = e.EncodeCanonical(buf[:0], r)
				}
				if err != nil {
					b.Fatal(err)
				}
				resp := &abi.Response{}
				if err := abi.DecodeResponse(answers[form], resp); err != nil {
					b.Fatal(err)
				}
				if err := abi.Validate(r, resp); err != nil {
					b.Fatal(err)
				}
				if len(resp.Results) != c {
					b.Fatalf("%d results", len(resp.Results))
				}
			}
		})
	}
}

// BenchmarkResolveOwners turns a whole-group owner-form answer to benchRequest into the list form
// (what Plugin.Allocate hands its caller): AVG's owners in blocks, circle's round-robin.
func BenchmarkResolveOwners(b *testing.B) {
	r := benchRequest()
	n, c := len(r.Queues), len(r.Consumers)
	shapes := []struct {
		name  string
		owner func(q int) int32
	}{
		{"blocks", func(q int) int32 { return int32(q * c / n) }},
		{"round-robin", func(q int) int32 { return int32(q % c) }},
	}
	for _, s := range shapes {
		owners := make([]int32, n)
		for q := range owners {
			owners[q] = s.owner(q)
		}
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := abi.ResolveOwners(r, owners); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
