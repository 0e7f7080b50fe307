package bench

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/plugins/sticky"
)

// kafkaRequests are the plugin requests the Kafka adapter writes in BenchmarkKafkaPlan64x1024:
// "fresh" (nobody owns anything, so every partition's previous owner is the leader's last plan)
// and "steady" (every member owns its partitions of that plan, the last member has left).
func kafkaRequests() (fresh, steady *abi.Request) {
	qs := make([]abi.Queue, kafkaPartitions)
	for i := range qs {
		qs[i] = abi.Queue{Topic: "t", QueueID: int32(i)}
	}
	ids := make([]string, kafkaMembers)
	for i := range ids {
		ids[i] = fmt.Sprintf("member-%02d", i)
	}
	owners := sticky.Assign(&sticky.Group{Queues: qs, Consumers: ids}, sticky.Options{})
	prev := make([]string, len(qs))
	for i, o := range owners {
		prev[i] = ids[o]
	}
	fresh = &abi.Request{Queues: qs, Consumers: ids, PrevOwners: prev}
	left := make([]string, len(qs))
	for i, o := range owners {
		if o != kafkaMembers-1 {
			left[i] = ids[o]
		}
	}
	steady = &abi.Request{Queues: qs, Consumers: ids[:kafkaMembers-1], PrevOwners: left}
	return fresh, steady
}

// BenchmarkKafkaGuest is the plugin's part of BenchmarkKafkaPlan64x1024's allocd rows: "call"
// the guest alone on the encoded request (Plugin.Call), "allocate" with the host's side
// (encoding, the call, decoding and checking the answer).
func BenchmarkKafkaGuest(b *testing.B) {
	ctx := context.Background()
	cfg := host.Config{CacheDir: os.Getenv("ALLOCD_BENCH_WASM")} // scripts/callgrind.sh: compiled before the counted runs
	if cfg.CacheDir == "" {
		cfg.CacheDir = b.TempDir()
	}
	rt, err := host.NewRuntime(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	fresh, steady := kafkaRequests()
	use := func([]byte) error { return nil }
	for _, name := range []string{"sticky", "averagely"} {
		p, err := rt.Load(ctx, name, buildGuest(b, "plugins/"+name+"/wasm", false))
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		for _, c := range []struct {
			name string
			req  *abi.Request
		}{{"fresh", fresh}, {"steady", steady}} {
			input, err := abi.EncodeRequest(nil, c.req)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(name+"/"+c.name+"/call", func(b *testing.B) {
				for b.Loop() {
					if err := p.Call(ctx, input, nil, use); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/"+c.name+"/allocate", func(b *testing.B) {
				for b.Loop() {
					if _, err := p.Allocate(ctx, c.req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
