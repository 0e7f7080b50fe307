package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host/internal/loopcheck"
)

// Runtime compiles and runs plugins. It is safe for concurrent use; one per process is enough.
type Runtime struct {
	cfg Config
	// rt runs modules instrumented by loopcheck, which stop at an interrupt flag the host sets;
	// guarded runs the rare module loopcheck cannot read, under wazero's own (costly) checks.
	rt      wazero.Runtime
	guarded wazero.Runtime
	cache   wazero.CompilationCache
	// forceGuarded runs every module under wazero's checks (tests and benchmarks only).
	forceGuarded bool
	log          zerolog.Logger
	// compileMu runs one compilation at a time: compiling competes with traffic for the CPU,
	// and the compilation cache does not deduplicate concurrent compiles of one module.
	compileMu sync.Mutex
}

// NewRuntime starts a runtime with the Extism and allocd imports and WASI (no files, no
// environment, fake clocks, fixed randomness).
func NewRuntime(ctx context.Context, cfg Config) (*Runtime, error) {
	cfg = cfg.withDefaults()
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("host: compilation cache %s: %w", cfg.CacheDir, err)
		}
		cache = c
	} else {
		cache = wazero.NewCompilationCache()
	}
	rc := wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(cache).
		WithMemoryLimitPages(cfg.MemoryLimitPages).
		WithCustomSections(false)
	r := &Runtime{
		cfg: cfg, cache: cache, log: cfg.Logger,
		rt: wazero.NewRuntimeWithConfig(ctx, rc),
		// wazero's own way to stop a looping guest, for modules loopcheck cannot instrument:
		// it calls into Go at every loop head, which made Go guests 3-6x slower (RATIONALE.md).
		guarded: wazero.NewRuntimeWithConfig(ctx, rc.WithCloseOnContextDone(true)),
	}
	for _, wr := range []wazero.Runtime{r.rt, r.guarded} {
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, wr); err != nil {
			r.Close(ctx)
			return nil, fmt.Errorf("host: WASI: %w", err)
		}
		if err := instantiateImports(ctx, wr); err != nil {
			r.Close(ctx)
			return nil, err
		}
	}
	return r, nil
}

// Close releases the runtime and every plugin compiled by it.
func (r *Runtime) Close(ctx context.Context) error {
	err := errors.Join(r.rt.Close(ctx), r.guarded.Close(ctx))
	if cerr := r.cache.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

// Config returns the runtime's configuration with defaults filled in.
func (r *Runtime) Config() Config { return r.cfg }

// Hash names a module's content: the hex SHA-256 of its bytes.
func Hash(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return hex.EncodeToString(sum[:])
}

// Load compiles a module, checks that it speaks ABI v1, starts one instance (so a broken module
// fails here, not on its first call) and reads its self-description. name identifies the plugin
// in errors, logs and metrics.
func (r *Runtime) Load(ctx context.Context, name string, wasm []byte) (*Plugin, error) {
	start := time.Now()
	loadErr := func(err error) error { return &Error{Plugin: name, Kind: KindLoad, Err: err} }
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, loadErr(errors.New("not a WebAssembly module (no \\0asm magic)"))
	}
	if len(wasm) > r.cfg.MaxModuleBytes {
		return nil, loadErr(fmt.Errorf("module is %d bytes, more than the limit (Config.MaxModuleBytes) of %d", len(wasm), r.cfg.MaxModuleBytes))
	}
	// Instrument the module so a runaway call can be stopped with one flag; a module the
	// rewriter cannot read runs under wazero's own checks instead.
	wr, code, interruptible := r.rt, wasm, true
	if out, err := loopcheck.Instrument(wasm); errors.Is(err, loopcheck.ErrMalformed) {
		// No runtime would take it, and compiling it anyway could cost what the checks saved.
		return nil, loadErr(err)
	} else if err == nil && !r.forceGuarded {
		code = out
	} else {
		if err == nil {
			err = errors.New("guarded runtime forced")
		}
		wr, interruptible = r.guarded, false
		r.log.Warn().Str("plugin", name).Err(err).Msg("plugin cannot be instrumented; it runs under wazero's slower termination checks")
	}
	r.compileMu.Lock()
	cctx := experimental.WithCompilationWorkers(ctx, r.cfg.CompileWorkers)
	compiled, err := wr.CompileModule(cctx, code)
	if err != nil && r.cfg.CacheDir != "" && strings.Contains(err.Error(), "compilationcache") {
		// The cache is only a cache: an entry it cannot read (garbage, a torn write, a
		// checksum mismatch) is deleted and the module compiled again.
		r.log.Warn().Str("plugin", name).Err(err).Str("cacheDir", r.cfg.CacheDir).
			Msg("compiled-code cache entry unreadable; clearing the cache and compiling again")
		r.clearCache()
		compiled, err = wr.CompileModule(cctx, code)
	}
	r.compileMu.Unlock()
	if err != nil {
		return nil, loadErr(fmt.Errorf("compile: %w", err))
	}
	compileTime := time.Since(start)
	if err := checkModule(compiled); err != nil {
		compiled.Close(ctx)
		return nil, loadErr(err)
	}
	p := newPlugin(r, name, Hash(wasm), compiled)
	p.wr, p.interruptible = wr, interruptible
	in, err := p.newInstance(ctx)
	if err != nil {
		compiled.Close(ctx)
		return nil, err
	}
	if err := p.describe(ctx, in); err != nil {
		in.close(ctx)
		compiled.Close(ctx)
		return nil, err
	}
	p.pool.put(in)
	p.log.Info().Str("hash", p.hash[:12]).Str("version", p.info.Version).
		Dur("compile", compileTime).Dur("load", time.Since(start)).Msg("plugin loaded")
	return p, nil
}

// clearCache deletes the compiled code wazero keeps in CacheDir. wazero names an entry by a hash
// of the module and of CPU features it does not expose, so the one bad entry cannot be picked
// out; the others are recompiled once, as on a first start. Only wazero's own folders
// (wazero-VERSION-ARCH-OS) are touched.
func (r *Runtime) clearCache() {
	dirs, _ := filepath.Glob(filepath.Join(r.cfg.CacheDir, "wazero-*"))
	for _, d := range dirs {
		files, _ := os.ReadDir(d)
		for _, f := range files {
			if !f.IsDir() {
				os.Remove(filepath.Join(d, f.Name()))
			}
		}
	}
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// requiredExports are the exports ABI v1 demands, with their signatures.
var requiredExports = []struct {
	name            string
	params, results []api.ValueType
}{
	{"allocate", nil, []api.ValueType{i32}},
	{"allocd_abi_version", nil, []api.ValueType{i32}},
}

// checkModule refuses a module that lacks an export ABI v1 requires, or that imports something
// the host does not provide, naming each problem: wazero's own link error names only the first.
func checkModule(m wazero.CompiledModule) error {
	var problems []string
	exports := m.ExportedFunctions()
	for _, want := range requiredExports {
		def, ok := exports[want.name]
		if !ok {
			problems = append(problems, fmt.Sprintf("missing export %q %s", want.name, signature(want.params, want.results)))
			continue
		}
		if !sameTypes(def.ParamTypes(), want.params) || !sameTypes(def.ResultTypes(), want.results) {
			problems = append(problems, fmt.Sprintf("export %q is %s, want %s", want.name,
				signature(def.ParamTypes(), def.ResultTypes()), signature(want.params, want.results)))
		}
	}
	if def, ok := exports["allocd_describe"]; ok && (len(def.ParamTypes()) != 0 || !sameTypes(def.ResultTypes(), []api.ValueType{i32})) {
		problems = append(problems, fmt.Sprintf("export \"allocd_describe\" is %s, want () -> (i32)", signature(def.ParamTypes(), def.ResultTypes())))
	}
	if _, ok := m.ExportedMemories()["memory"]; !ok {
		problems = append(problems, `missing export "memory"`)
	}
	for _, imp := range m.ImportedFunctions() {
		module, name, _ := imp.Import()
		if module == wasi_snapshot_preview1.ModuleName {
			continue
		}
		sig, ok := provided[module+"."+name]
		if !ok {
			problems = append(problems, fmt.Sprintf("imports %s.%s, which allocd does not provide", module, name))
			continue
		}
		if !sameTypes(imp.ParamTypes(), sig.params) || !sameTypes(imp.ResultTypes(), sig.results) {
			problems = append(problems, fmt.Sprintf("imports %s.%s as %s, allocd provides %s", module, name,
				signature(imp.ParamTypes(), imp.ResultTypes()), signature(sig.params, sig.results)))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return fmt.Errorf("not an ABI v%d plugin: %s", abi.Major, strings.Join(problems, "; "))
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func signature(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(s, ", ") + ")"
	}
	return names(params) + " -> " + names(results)
}
