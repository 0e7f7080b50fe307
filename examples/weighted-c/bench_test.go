package weightedc_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/wasmbuild"
)

// BenchmarkWholeGroup asks the C plugin and the Go plugin that `allocd init-plugin` writes (the
// same strategy) for a whole group of 1024 queues and 64 consumers with weights 1 to 4, through
// the host as the daemon calls them: encode, one call, decode, validate; and the same group
// without labels (equal weights), where the host's side costs less. BENCHMARKS.md records the
// figures.
func BenchmarkWholeGroup(b *testing.B) {
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx, host.Config{CacheDir: os.TempDir() + "/allocd-test-cache", MaxInstances: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	req := &abi.Request{Group: "GID_allocd_bench"}
	for broker := range 4 {
		for id := range 256 {
			req.Queues = append(req.Queues, abi.Queue{Topic: "TopicTest", BrokerName: "broker-" + strconv.Itoa(broker), QueueID: int32(id)})
		}
	}
	for i := range 64 {
		req.Consumers = append(req.Consumers, fmt.Sprintf("10.0.0.%d@%d", i+1, 4000+i))
		req.ConsumerAttrs = append(req.ConsumerAttrs, abi.Attrs{
			Labels: map[string]string{"weight": strconv.Itoa(1 + i%4), "zone": "zone-" + strconv.Itoa(i%3)}})
	}
	abi.Canonicalize(req)
	for _, lang := range []struct{ name, path string }{
		{"c", wasmbuild.Example(b, "weighted-c")}, {"go", wasmbuild.Scaffold(b)},
	} {
		wasm, err := os.ReadFile(lang.path)
		if err != nil {
			b.Fatal(err)
		}
		p, err := rt.Load(ctx, lang.name, wasm)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range []struct {
			name string
			req  *abi.Request
		}{{"1024x64", req}, {"1024x64-nolabels", &abi.Request{Group: req.Group, Queues: req.Queues, Consumers: req.Consumers}}} {
			b.Run("lang="+lang.name+"/"+r.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Allocate(ctx, r.req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		p.Close(ctx)
	}
}
