package host_test

// Benchmarks of issue 2, item 8. BENCHMARKS.md at the repository root records the commands and
// the figures; the extism go-sdk comparison lives in the separate module bench/.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/plugins/circle"
	"github.com/allocd/allocd/plugins/hash"
	"github.com/allocd/allocd/plugins/rocketmq"
)

// BenchmarkCallOverhead is one call of a plugin that does nothing, through Plugin.Call with an
// empty input: pool, per-call reset, deadline and the wasm call itself.
func BenchmarkCallOverhead(b *testing.B) {
	rt := newRuntime(b, host.Config{})
	p := load(b, rt, "noop")
	ctx := context.Background()
	use := func([]byte) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Call(ctx, nil, nil, use); err != nil {
			b.Fatal(err)
		}
	}
}

// wholeGroupRequest is the whole-group request: 1024 queues of TopicTest (brokers
// broker-0..broker-3, 256 queues each) and 64 consumers with RocketMQ-style client ids, in
// canonical order, asking for every consumer.
func wholeGroupRequest() *abi.Request {
	r := &abi.Request{Group: "GID_allocd_bench", Queues: queues("TopicTest", 4, 256)}
	for i := range 64 {
		r.Consumers = append(r.Consumers, fmt.Sprintf("10.0.0.%d@%d", i+1, 4000+i))
	}
	abi.Canonicalize(r)
	return r
}

// native computes every consumer's list over Go slices, as a Go program that links the
// algorithm package would. Consumers are distinct, so consumer i's index in cidAll is i.
var native = map[string]func(r *abi.Request) ([][]int, error){
	"averagely": func(r *abi.Request) ([][]int, error) {
		n, c := len(r.Queues), len(r.Consumers)
		out := make([][]int, c)
		for self, cid := range r.Consumers {
			if err := rocketmq.Check(cid, n, c); err != nil {
				return nil, err
			}
			out[self] = averagely.Allocate(nil, n, c, self)
		}
		return out, nil
	},
	"circle": func(r *abi.Request) ([][]int, error) {
		n, c := len(r.Queues), len(r.Consumers)
		out := make([][]int, c)
		for self, cid := range r.Consumers {
			if err := rocketmq.Check(cid, n, c); err != nil {
				return nil, err
			}
			out[self] = circle.Allocate(nil, n, c, self)
		}
		return out, nil
	},
	// hash does what plugins/hash/wasm does: one ring, one Assign, owners bucketed by a
	// counting sort so that each consumer's list is a slice of one array.
	"hash": func(r *abi.Request) ([][]int, error) {
		n, c := len(r.Queues), len(r.Consumers)
		ring, err := hash.NewRing(c, func(i int) string { return r.Consumers[i] }, hash.DefaultVirtualNodes)
		if err != nil {
			return nil, err
		}
		owners := make([]int, n)
		ring.Assign(owners, n, func(i int) (string, string, int32) {
			q := &r.Queues[i]
			return q.Topic, q.BrokerName, q.QueueID
		})
		starts := make([]int, c+1)
		for _, o := range owners {
			if o >= 0 {
				starts[o+1]++
			}
		}
		for o := range c {
			starts[o+1] += starts[o]
		}
		byOwner := make([]int, starts[c])
		next := slices.Clone(starts[:c])
		for i, o := range owners {
			if o >= 0 {
				byOwner[next[o]] = i
				next[o]++
			}
		}
		out := make([][]int, c)
		for self, cid := range r.Consumers {
			if err := rocketmq.Check(cid, n, c); err != nil {
				return nil, err
			}
			out[self] = byOwner[starts[self]:starts[self+1]:starts[self+1]]
		}
		return out, nil
	},
}

// BenchmarkWholeGroup computes the whole group's assignment of wholeGroupRequest: natively, and
// as wasm through Plugin.Allocate (canonical-order check, encoding, the call under its deadline,
// decoding and validation of the answer). wasm-guarded runs the same module under wazero's
// WithCloseOnContextDone checks instead of loopcheck's flag, to show what those cost.
func BenchmarkWholeGroup(b *testing.B) {
	ctx := context.Background()
	for _, name := range []string{"averagely", "circle", "hash"} {
		b.Run(name, func(b *testing.B) {
			want, err := native[name](wholeGroupRequest())
			if err != nil {
				b.Fatal(err)
			}
			b.Run("native", func(b *testing.B) {
				req := wholeGroupRequest()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := native[name](req); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("wasm", func(b *testing.B) {
				benchAllocate(b, newRuntime(b, host.Config{}), name, wholeGroupRequest(), want)
			})
			// The same without wazero's termination checks (WithCloseOnContextDone): what the
			// deadline costs. Not a mode the product offers; see BENCHMARKS.md.
			b.Run("wasm-guarded", func(b *testing.B) {
				rt, err := host.NewRuntimeGuarded(ctx, host.Config{CacheDir: cacheDir})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { rt.Close(context.Background()) })
				benchAllocate(b, rt, name, wholeGroupRequest(), want)
			})
		})
	}
}

// benchAllocate loads the built-in plugin name into rt, checks once that it answers want, and
// measures Plugin.Allocate on the whole-group request.
func benchAllocate(b *testing.B, rt *host.Runtime, name string, req *abi.Request, want [][]int) {
	ctx := context.Background()
	p, err := rt.Load(ctx, name, wasmbuild.Bytes(b, "plugins/"+name+"/wasm"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close(context.Background()) })
	resp, err := p.Allocate(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	// The two sides must compute the same thing, or the ratio means nothing.
	for i, r := range resp.Results {
		if r.Failed || !slices.Equal(r.Indices, want[i]) {
			b.Fatalf("wasm and native disagree for consumer %d: %v / %v", i, r, want[i])
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Allocate(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTransfer echoes 1 KiB and 64 KiB through the echo plugin: "bytewise" is its allocate
// export, go-pdk's Input and Output (one host call per 8 bytes each way); "bulk" is its echo_bulk
// export, allocd:host/v1 input_read and output_write (one host call each way).
func BenchmarkTransfer(b *testing.B) {
	rt := newRuntime(b, host.Config{})
	p := load(b, rt, "echo")
	ctx := context.Background()
	for _, path := range []struct{ name, export string }{{"bytewise", "allocate"}, {"bulk", "echo_bulk"}} {
		b.Run(path.name, func(b *testing.B) {
			for _, size := range []struct {
				name string
				n    int
			}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}} {
				b.Run(size.name, func(b *testing.B) {
					in := make([]byte, size.n)
					rng := rand.NewChaCha8([32]byte{1})
					rng.Read(in)
					use := func(out []byte) error {
						if len(out) != len(in) {
							return fmt.Errorf("echoed %d bytes of %d", len(out), len(in))
						}
						return nil
					}
					// Once with a full comparison, then only the length.
					if err := p.CallExport(ctx, path.export, in, func(out []byte) error {
						if !bytes.Equal(out, in) {
							return fmt.Errorf("echo differs")
						}
						return nil
					}); err != nil {
						b.Fatal(err)
					}
					b.SetBytes(int64(size.n))
					b.ReportAllocs()
					for b.Loop() {
						if err := p.CallExport(ctx, path.export, in, use); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
