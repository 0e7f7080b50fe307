package host

import (
	"context"
	"fmt"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// NewRuntimeUninterruptible is NewRuntime without wazero's WithCloseOnContextDone: the deadline is
// still armed, but nothing stops a guest that runs past it. It exists only to measure what the
// termination checks cost (BenchmarkWholeGroup/.../wasm-nodeadline); the product never runs
// plugins this way.
func NewRuntimeUninterruptible(ctx context.Context, cfg Config) (*Runtime, error) {
	cfg = cfg.withDefaults()
	cache, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	rc := wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(cache).
		WithMemoryLimitPages(cfg.MemoryLimitPages).
		WithCloseOnContextDone(false).
		WithCustomSections(false)
	r := &Runtime{cfg: cfg, rt: wazero.NewRuntimeWithConfig(ctx, rc), cache: cache, log: cfg.Logger}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r.rt); err != nil {
		r.rt.Close(ctx)
		return nil, err
	}
	if err := instantiateImports(ctx, r.rt); err != nil {
		r.rt.Close(ctx)
		return nil, err
	}
	return r, nil
}

// exports caches, per instance, the functions CallExport looked up: ExportedFunction costs
// microseconds and kilobytes per lookup, which would swamp what the benchmarks measure.
var exports sync.Map // exportKey -> api.Function

type exportKey struct {
	in   *instance
	name string
}

// CallExport is Call for any export with the Extism shape () -> i32, for tests and benchmarks
// (the echo plugin's echo_bulk). It takes an instance from the pool, applies the same deadline
// and limits as Call, and hands the output to use, which must not keep it.
func (p *Plugin) CallExport(ctx context.Context, name string, input []byte, use func(out []byte) error) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.inflight.Done()
	in, err := p.acquire(ctx)
	if err != nil {
		return err
	}
	key := exportKey{in, name}
	fn, ok := exports.Load(key)
	if !ok {
		f := in.mod.ExportedFunction(name)
		if f == nil {
			p.release(ctx, in, nil)
			return fmt.Errorf("plugin %q has no export %q", p.name, name)
		}
		fn, _ = exports.LoadOrStore(key, f)
	}
	out, err := in.call(ctx, fn.(api.Function), input, nil)
	if err == nil && use != nil {
		if uerr := use(out); uerr != nil {
			err = &Error{Plugin: p.name, Kind: KindInvalid, Err: uerr}
		}
	}
	p.release(ctx, in, err)
	return err
}
