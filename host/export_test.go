package host

import (
	"context"
	"fmt"
	"sync"

	"github.com/tetratelabs/wazero/api"
)

// NewRuntimeGuarded is NewRuntime whose plugins all run under wazero's WithCloseOnContextDone
// checks instead of loopcheck's interrupt flag. It exists only to measure what those checks cost
// (BenchmarkWholeGroup/.../wasm-guarded) and to test the fallback path.
func NewRuntimeGuarded(ctx context.Context, cfg Config) (*Runtime, error) {
	r, err := NewRuntime(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r.forceGuarded = true
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
