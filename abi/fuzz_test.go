package abi_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/allocd/allocd/abi"
)

// addGoldenSeeds seeds a fuzz target with every golden vector of the given prefix ("req-",
// "bad-", "resp-"), so plain go test runs each target over them.
func addGoldenSeeds(f *testing.F, prefixes ...string) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.bin"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no golden vectors to seed from: %v", err)
	}
	for _, file := range files {
		base := filepath.Base(file)
		for _, p := range prefixes {
			if strings.HasPrefix(base, p) {
				b, err := os.ReadFile(file)
				if err != nil {
					f.Fatal(err)
				}
				f.Add(b)
			}
		}
	}
}

// FuzzParseRequest: ParseRequest never panics, and every accessor of a view it accepts answers
// for every valid index without panicking, consistently with the fully decoded request.
func FuzzParseRequest(f *testing.F) {
	addGoldenSeeds(f, "req-", "bad-")
	f.Add([]byte{})
	f.Add([]byte("ALRQ\x01\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := abi.ParseRequest(b)
		if err != nil {
			return
		}
		checkView(t, v)
	})
}

// checkView calls every accessor of v on every index and checks them against v.Request().
func checkView(t *testing.T, v *abi.View) {
	t.Helper()
	r := v.Request()
	_ = v.Minor()
	if v.Group() != r.Group {
		t.Fatalf("Group %q, decoded %q", v.Group(), r.Group)
	}
	if v.NumQueues() != len(r.Queues) || v.NumConsumers() != len(r.Consumers) {
		t.Fatalf("counts differ from the decoded request")
	}
	for i := range v.NumQueues() {
		if v.Queue(i) != r.Queues[i] {
			t.Fatalf("Queue(%d) = %v, decoded %v", i, v.Queue(i), r.Queues[i])
		}
		owner, ok := v.PrevOwner(i)
		if r.PrevOwners == nil && ok || r.PrevOwners != nil && owner != r.PrevOwners[i] {
			t.Fatalf("PrevOwner(%d) = %q, %v", i, owner, ok)
		}
		checkAttrs(t, v.QueueLabel, v.QueueMetric, r.QueueAttrs, i)
	}
	if v.HasEmptyConsumer() != slices.Contains(r.Consumers, "") {
		t.Fatalf("HasEmptyConsumer %v for %q", v.HasEmptyConsumer(), r.Consumers)
	}
	if sorted := slices.Sorted(slices.Values(r.Consumers)); len(slices.Compact(sorted)) == len(r.Consumers) && !v.DistinctConsumers() {
		t.Fatalf("DistinctConsumers false for the distinct %q", r.Consumers)
	}
	if all := v.Consumers([]string{"x"}); all[0] != "x" || !slices.Equal(all[1:], r.Consumers) {
		t.Fatalf("Consumers = %q, decoded %q", all, r.Consumers)
	}
	if !v.SameConsumers(r.Consumers) || v.SameConsumers(append(slices.Clone(r.Consumers), "")) {
		t.Fatalf("SameConsumers does not tell the decoded %q from one more", r.Consumers)
	}
	if n := len(r.Consumers); n > 0 && v.SameConsumers(append(slices.Clone(r.Consumers[:n-1]), r.Consumers[n-1]+"x")) {
		t.Fatalf("SameConsumers takes %q with its last id changed for itself", r.Consumers)
	}
	for i := range v.NumConsumers() {
		if v.Consumer(i) != r.Consumers[i] {
			t.Fatalf("Consumer(%d) = %q, decoded %q", i, v.Consumer(i), r.Consumers[i])
		}
		if j := v.ConsumerFirstIndex(i); j < 0 || j > i || v.Consumer(j) != v.Consumer(i) {
			t.Fatalf("ConsumerFirstIndex(%d) = %d for %q", i, j, v.Consumer(i))
		}
		checkAttrs(t, v.ConsumerLabel, v.ConsumerMetric, r.ConsumerAttrs, i)
	}
	prev := make([]int32, v.NumQueues())
	v.PrevOwnerIndices(prev)
	for i, j := range prev {
		owner, _ := v.PrevOwner(i)
		// As for TargetIndex, -1 proves nothing against a hostile writer; a hit must be right.
		if int(j) != v.PrevOwnerIndex(i) || j < -1 || int(j) >= v.NumConsumers() || j >= 0 && v.Consumer(int(j)) != owner {
			t.Fatalf("PrevOwnerIndices[%d] = %d, PrevOwnerIndex %d, for %q", i, j, v.PrevOwnerIndex(i), owner)
		}
	}
	if v.WholeGroup() != (r.Targets == nil) || v.NumTargets() != r.NumTargets() {
		t.Fatalf("WholeGroup %v, NumTargets %d; decoded targets %v", v.WholeGroup(), v.NumTargets(), r.Targets)
	}
	for i := range v.NumTargets() {
		if v.Target(i) != r.Target(i) {
			t.Fatalf("Target(%d) = %q, decoded %q", i, v.Target(i), r.Target(i))
		}
		// A hostile writer may store a string twice, so -1 proves nothing; a hit must be right.
		if j := v.TargetIndex(i); j < -1 || j >= v.NumConsumers() || j >= 0 && v.Consumer(j) != v.Target(i) {
			t.Fatalf("TargetIndex(%d) = %d for %q", i, j, v.Target(i))
		}
		if cid, j := v.TargetAt(i); cid != v.Target(i) || j != v.TargetIndex(i) {
			t.Fatalf("TargetAt(%d) = %q, %d; Target and TargetIndex say %q, %d", i, cid, j, v.Target(i), v.TargetIndex(i))
		}
	}
	for k, want := range r.Config {
		if got, ok := v.Config(k); !ok || got != want {
			t.Fatalf("Config(%q) = %q, %v; decoded %q", k, got, ok, want)
		}
	}
	if _, ok := v.Config("\xff no such key"); ok {
		if _, in := r.Config["\xff no such key"]; !in {
			t.Fatalf("Config found a key the request lacks")
		}
	}
	_, _ = v.HasQueueAttrs(), v.HasConsumerAttrs()
	if (r.QueueAttrs != nil) != v.HasQueueAttrs() || (r.ConsumerAttrs != nil) != v.HasConsumerAttrs() {
		t.Fatalf("Has*Attrs disagree with the decoded request")
	}
}

func checkAttrs(t *testing.T, label func(int, string) (string, bool), metric func(int, string) (int64, bool), attrs []abi.Attrs, i int) {
	t.Helper()
	var a abi.Attrs
	if attrs != nil {
		a = attrs[i]
	}
	for k, want := range a.Labels {
		if got, ok := label(i, k); !ok || got != want {
			t.Fatalf("label %q of %d = %q, %v; decoded %q", k, i, got, ok, want)
		}
	}
	for k, want := range a.Metrics {
		if got, ok := metric(i, k); !ok || got != want {
			t.Fatalf("metric %q of %d = %d, %v; decoded %d", k, i, got, ok, want)
		}
	}
	if _, ok := label(i, "\x00absent"); ok {
		if _, in := a.Labels["\x00absent"]; !in {
			t.Fatalf("label lookup found a key that is not there")
		}
	}
	if _, ok := metric(i, "\x00absent"); ok {
		if _, in := a.Metrics["\x00absent"]; !in {
			t.Fatalf("metric lookup found a key that is not there")
		}
	}
}

// FuzzRequestRoundTrip: for any bytes that parse, decode, encode, decode gives the same request,
// and encoding that again gives the same bytes.
func FuzzRequestRoundTrip(f *testing.F) {
	addGoldenSeeds(f, "req-")
	f.Fuzz(func(t *testing.T, b []byte) {
		r1, err := abi.DecodeRequest(b)
		if err != nil {
			return
		}
		var e abi.Encoder
		b2, err := e.Encode(nil, r1)
		if err != nil {
			t.Fatalf("re-encoding a decoded request: %v", err)
		}
		r2, err := abi.DecodeRequest(b2)
		if err != nil {
			t.Fatalf("decoding our own encoding: %v\n%x", err, b2)
		}
		if !reflect.DeepEqual(r1, r2) {
			t.Fatalf("round trip changed the request\nfirst  %#v\nsecond %#v", r1, r2)
		}
		b3, err := e.Encode(nil, r2)
		if err != nil || !bytes.Equal(b2, b3) {
			t.Fatalf("re-encoding is not stable (%v)\n%x\n%x", err, b2, b3)
		}
	})
}

// FuzzDecodeResponse: DecodeResponse never panics; what it accepts encodes to a message of the
// same length and header that decodes to the same response, and encodes again to the same bytes.
func FuzzDecodeResponse(f *testing.F) {
	addGoldenSeeds(f, "resp-")
	f.Add([]byte{})
	f.Add([]byte("ALRS\x01\x00\x00\x00\x18\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x03\x00\x00\x00abc\x00"))
	f.Add([]byte("ALRO\x01\x00\x01\x00\x18\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r abi.Response
		if err := abi.DecodeResponse(b, &r); err != nil {
			return
		}
		enc := abi.EncodeResponse(nil, &r)
		// Only the minor version and the padding of error messages may differ.
		if len(enc) != len(b) || !bytes.Equal(enc[:4], b[:4]) || !bytes.Equal(enc[8:16], b[8:16]) {
			t.Fatalf("re-encoding changed the shape:\n%x\n%x", b, enc)
		}
		var r2 abi.Response
		if err := abi.DecodeResponse(enc, &r2); err != nil {
			t.Fatalf("decoding our own encoding: %v", err)
		}
		if !r.Equal(&r2) || !slices.Equal(r.Owners, r2.Owners) || (r.Owners == nil) != (r2.Owners == nil) {
			t.Fatalf("round trip changed the response: %+v, then %+v", r, r2)
		}
		if again := abi.EncodeResponse(nil, &r2); !bytes.Equal(again, enc) {
			t.Fatalf("re-encoding is not stable")
		}
		// DecodeResponseShared reads the same answer, from a buffer at every alignment.
		for shift := range 4 {
			buf := append(make([]byte, shift, shift+len(b)), b...)[shift:]
			var r3 abi.Response
			if err := abi.DecodeResponseShared(buf, &r3); err != nil {
				t.Fatalf("DecodeResponseShared (shift %d) refuses what DecodeResponse accepts: %v", shift, err)
			}
			if !r.Equal(&r3) || !slices.Equal(r.Owners, r3.Owners) || (r.Owners == nil) != (r3.Owners == nil) {
				t.Fatalf("DecodeResponseShared (shift %d) read %+v, DecodeResponse %+v", shift, r3, r)
			}
		}
	})
}

// randomRequest builds a request with every optional part present or absent at random, strings
// drawn from a small pool so that they repeat, and empty strings and non-ASCII among them.
func randomRequest(rng *rand.Rand) *abi.Request {
	pool := []string{"", "a", "b", "c1", "c2", "broker-10", "broker-2", "TopicTest", "zone", "lag", "ü", "组", "🚀", "x\x00y"}
	pick := func() string {
		if rng.IntN(4) == 0 {
			return strings.Repeat("s", rng.IntN(40)) + pool[rng.IntN(len(pool))]
		}
		return pool[rng.IntN(len(pool))]
	}
	list := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = pick()
		}
		return out
	}
	attrs := func(n int) []abi.Attrs {
		out := make([]abi.Attrs, n)
		for i := range out {
			for range rng.IntN(3) {
				if out[i].Labels == nil {
					out[i].Labels = map[string]string{}
				}
				out[i].Labels[pick()] = pick()
			}
			for range rng.IntN(3) {
				if out[i].Metrics == nil {
					out[i].Metrics = map[string]int64{}
				}
				out[i].Metrics[pick()] = int64(rng.Uint64())
			}
			if rng.IntN(8) == 0 { // an empty, non-nil map encodes as none
				out[i].Labels = map[string]string{}
			}
		}
		return out
	}
	maybe := func() bool { return rng.IntN(2) == 0 }

	r := &abi.Request{Group: pick()}
	nq, nc := rng.IntN(20), rng.IntN(8)
	if nq > 0 || maybe() {
		r.Queues = make([]abi.Queue, nq)
		for i := range r.Queues {
			r.Queues[i] = abi.Queue{Topic: pick(), BrokerName: pick(), QueueID: int32(rng.Uint32())}
		}
	}
	if nc > 0 || maybe() {
		r.Consumers = list(nc)
	}
	if maybe() {
		r.Targets = list(rng.IntN(5))
	}
	if maybe() {
		r.Config = map[string]string{}
		for range rng.IntN(4) {
			r.Config[pick()] = pick()
		}
	}
	if maybe() {
		r.QueueAttrs = attrs(nq)
	}
	if maybe() {
		r.ConsumerAttrs = attrs(nc)
	}
	if maybe() {
		r.PrevOwners = list(nq)
	}
	return r
}

// TestRequestRoundTripRandom: decode(encode(r)) == r for random requests, up to the nil-versus-
// empty distinctions the encoding does not keep (see normalize), and ParseRequest's accessors
// agree with the decoded request.
func TestRequestRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 11))
	var e abi.Encoder
	var buf []byte
	for i := range 3000 {
		r := randomRequest(rng)
		var err error
		prefix := rng.IntN(4) // an encoding appended after other bytes is the same
		buf, err = e.Encode(append(buf[:0], "xyz"[:prefix]...), r)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got, err := abi.DecodeRequest(buf[prefix:])
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if want := normalize(r); !reflect.DeepEqual(got, want) {
			t.Fatalf("request %d: decoded\n%#v\nwant\n%#v", i, got, want)
		}
		fresh, _ := abi.EncodeRequest(nil, r)
		if !bytes.Equal(fresh, buf[prefix:]) {
			t.Fatalf("request %d: a reused Encoder and a fresh one disagree", i)
		}
		v, err := abi.ParseRequest(fresh)
		if err != nil {
			t.Fatal(err)
		}
		checkView(t, v)
	}
}

// TestResponseRoundTripRandom: DecodeResponse(EncodeResponse(r)) == r, decoding into a reused
// Response.
func TestResponseRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var got abi.Response
	for i := range 2000 {
		var r abi.Response
		for range rng.IntN(10) {
			if rng.IntN(4) == 0 {
				r.Results = append(r.Results, abi.Result{Failed: true, Err: strings.Repeat("é", rng.IntN(5)) + strings.Repeat("x", rng.IntN(7))})
				continue
			}
			var idx []int
			for range rng.IntN(12) {
				idx = append(idx, rng.IntN(1<<20))
			}
			r.Results = append(r.Results, abi.Result{Indices: idx})
		}
		b := abi.EncodeResponse(nil, &r)
		if len(b)%4 != 0 {
			t.Fatalf("response %d: %d bytes, not a multiple of 4", i, len(b))
		}
		if err := abi.DecodeResponse(b, &got); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if !got.Equal(&r) {
			t.Fatalf("response %d: decoded %+v, want %+v", i, got, r)
		}
	}
}
