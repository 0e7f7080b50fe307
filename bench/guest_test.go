package bench

import (
	"context"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
)

// wholeGroupRequest is host's BenchmarkWholeGroup request: 1024 queues of TopicTest (brokers
// broker-0..broker-3, 256 queues each) and 64 consumers, in canonical order, for every consumer.
func wholeGroupRequest() *abi.Request { return groupRequest(4, 256, 64) }

// BenchmarkGuestParts splits a built-in plugin's whole-group call into its parts. Each probe of
// guest/ does one part of what the SDK does in a call; averagely/call is the whole guest (the
// averagely plugin on the encoded request, through Plugin.Call), and averagely/allocate adds the
// host's side (canonical-order check, encoding, decoding and validating the answer). All run on
// allocd's host with its deadline on, as in production.
func BenchmarkGuestParts(b *testing.B) {
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx, host.Config{CacheDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	req := wholeGroupRequest()
	input, err := abi.EncodeRequest(nil, req)
	if err != nil {
		b.Fatal(err)
	}
	use := func([]byte) error { return nil }
	for _, part := range []struct {
		name, pkg string
		local     bool
	}{
		{"empty", "guest/empty", true},
		{"readstatic", "guest/readstatic", true},
		{"readalloc", "guest/readalloc", true},
		{"parse", "guest/parse", true},
		{"respond", "guest/respond", true},
		{"sdk", "guest/sdk", true},
		{"averagely", "plugins/averagely/wasm", false},
	} {
		p, err := rt.Load(ctx, part.name, buildGuest(b, part.pkg, part.local))
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		name := part.name
		if name == "averagely" {
			name = "averagely/call"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Call(ctx, input, nil, use); err != nil {
					b.Fatal(err)
				}
			}
		})
		if part.name == "averagely" {
			b.Run("averagely/allocate", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Allocate(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
