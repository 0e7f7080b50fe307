package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
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

// The sticky plugin, one instance serving a sequence of requests (so its ring and storage carry
// over: members leaving and joining, a repeated id, which it answers one consumer at a time,
// previous owners from its last answer), answers each as the sticky package computes it afresh.
func TestStickyGuestSequence(t *testing.T) {
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx, host.Config{CacheDir: t.TempDir(), MaxInstances: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	p, err := rt.Load(ctx, "sticky", buildGuest(t, "plugins/sticky/wasm", false))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	qs := make([]abi.Queue, 700)
	for i := range qs {
		qs[i] = abi.Queue{Topic: "t", QueueID: int32(i)}
	}
	ids := []string{}
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("member-%02d", i))
	}
	var prev []string
	for step := range 16 {
		cons := slices.Clone(ids)
		switch step % 4 {
		case 1: // one leaves
			cons = slices.Delete(cons, step, step+1)
		case 2: // two join
			cons = append(cons, fmt.Sprintf("member-%02d-b", step), fmt.Sprintf("member-%02d-c", step))
			slices.Sort(cons)
		case 3: // a repeated id
			cons = append(cons, cons[step])
			slices.Sort(cons)
		}
		req := &abi.Request{Queues: qs, Consumers: cons, PrevOwners: prev}
		resp, err := p.Allocate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		owners := sticky.Assign(&sticky.Group{Queues: qs, Consumers: cons, PrevOwners: prev}, sticky.Options{})
		starts, byOwner := sticky.Buckets(owners, len(cons))
		for j := range cons {
			first := slices.Index(cons, cons[j])
			if want := byOwner[starts[first]:starts[first+1]]; !slices.Equal(resp.Results[j].Indices, want) {
				t.Fatalf("step %d: consumer %d (%s) got %v, want %v", step, j, cons[j], resp.Results[j].Indices, want)
			}
		}
		prev = make([]string, len(qs))
		for i, o := range owners {
			prev[i] = cons[o]
		}
		ids = slices.Compact(cons)
	}
}
