package registry

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/allocd/allocd/harness"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/wasmbuild"
)

// BenchmarkReload measures the time from writing a new version of a plugin file (a temp file
// renamed over it) to the new version serving, while two goroutines call the plugin without
// pause. "uncached" gives every version new bytes (a custom section holding a counter), so each
// one is compiled; "cached" alternates between two versions whose compiled code is in the cache.
// The figure includes the registry's debounce (Options.Debounce, DefaultDebounce). Run it with
// a fixed count, a reload takes seconds uncached:
//
//	go test -run '^$' -bench Reload -benchtime 5x ./registry/
//
// The "+quick" variants add the daemon's validation step, harness.Quick, as `allocd serve` runs it.
func BenchmarkReload(b *testing.B) {
	b.Run("uncached", func(b *testing.B) { benchReload(b, false, nil) })
	b.Run("cached", func(b *testing.B) { benchReload(b, true, nil) })
	quick := func(ctx context.Context, p *host.Plugin) error { return harness.Quick(ctx, p, nil) }
	b.Run("uncached+quick", func(b *testing.B) { benchReload(b, false, quick) })
	b.Run("cached+quick", func(b *testing.B) { benchReload(b, true, quick) })
}

type durations struct {
	mu sync.Mutex
	d  []time.Duration
}

func (m *durations) ObserveReload(plugin, result string, d time.Duration) {
	m.mu.Lock()
	m.d = append(m.d, d)
	m.mu.Unlock()
}

func benchReload(b *testing.B, cached bool, validate func(context.Context, *host.Plugin) error) {
	dir := b.TempDir()
	first, plain := wasmbuild.Bytes(b, pkgFirst), wasmbuild.Bytes(b, pkgPlain)
	writeFile(b, dir+"/a.wasm", first)
	pipeline := &durations{}
	r, err := New(testRuntime(b), dir, Options{Logger: zerolog.Nop(), Metrics: pipeline, Validate: validate})
	if err != nil {
		b.Fatal(err)
	}
	events, unsubscribe := r.Subscribe()
	defer unsubscribe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	reload := func(data []byte) time.Duration {
		hash := host.Hash(data)
		start := time.Now()
		renameInto(b, r.path("a"), data)
		timeout := time.After(waitFor)
		for {
			select {
			case e := <-events:
				if e.Name == "a" && e.Hash == hash {
					if e.Kind != Reloaded {
						b.Fatalf("event %+v", e)
					}
					return time.Since(start)
				}
			case <-timeout:
				b.Fatal("no reload")
			}
		}
	}
	versions := [][]byte{plain, first}
	if cached {
		for _, v := range versions { // both in the compilation cache before the clock starts
			reload(v)
		}
	}
	pipeline.mu.Lock()
	pipeline.d = nil
	pipeline.mu.Unlock()

	c := startCallers(r, "a", 2)
	var total, worst time.Duration
	b.ResetTimer()
	for i := range b.N {
		data := versions[i%2]
		if !cached {
			data = withSection(first, int(time.Now().UnixNano())+i)
		}
		d := reload(data)
		total += d
		worst = max(worst, d)
	}
	b.StopTimer()
	calls := c.calls.Load()
	c.end(b)
	pipeline.mu.Lock()
	p := slices.Clone(pipeline.d)
	pipeline.mu.Unlock()
	var ptotal time.Duration
	for _, d := range p {
		ptotal += d
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/reload")
	b.ReportMetric(float64(worst.Milliseconds()), "max-ms")
	if len(p) > 0 {
		b.ReportMetric(float64(ptotal.Milliseconds())/float64(len(p)), "pipeline-ms")
	}
	b.ReportMetric(float64(calls)/float64(b.N), "calls/reload")
	b.ReportMetric(0, "ns/op")
}
