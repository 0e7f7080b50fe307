package registry

import (
	"context"
	"time"

	"github.com/allocd/allocd/host"
)

// Check runs on wasm every step a new version must pass before a registry lets it serve: it
// loads the module as plugin name on rt (compiling it and checking its ABI), makes the
// self-test call, whose answer must pass abi.Validate, and runs validate when it is not nil;
// then it closes the plugin. Code that receives a module from elsewhere (a client loading one
// from a daemon) uses it to judge the module by the daemon's own rule before keeping it.
func Check(ctx context.Context, rt *host.Runtime, name string, wasm []byte, validate func(context.Context, *host.Plugin) error) error {
	// As in a registry's load, the compile is bounded by ctx alone, and the self-test with
	// validate by DefaultValidateTimeout too: a compile on a busy machine may take long.
	p, err := rt.Load(ctx, name, wasm)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultValidateTimeout)
	defer cancel()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		p.Close(cctx)
		cancel()
	}()
	if err := selfTest(ctx, p); err != nil {
		return stageError{"self-test", err}
	}
	if validate != nil {
		if err := validate(ctx, p); err != nil {
			return stageError{"validate", err}
		}
	}
	return nil
}

// stageError names the check a module failed, as the registry's rejections do.
type stageError struct {
	stage string
	err   error
}

func (e stageError) Error() string { return e.stage + ": " + e.err.Error() }
func (e stageError) Unwrap() error { return e.err }
