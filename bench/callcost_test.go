package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"

	"github.com/allocd/allocd/host"
)

// buildGuest compiles a plugin package the way `make plugins` does and returns the module's
// bytes. pkg is a folder relative to the root module (such as "host/testdata/plugins/noop") or,
// with local set, relative to this module (such as "guest/parse").
func buildGuest(tb testing.TB, pkg string, local bool) []byte {
	tb.Helper()
	// Prebuilt modules (scripts/callgrind.sh): valgrind stops at the signal a child process's exit
	// sends, so the guests are built before the counted run, named after their package.
	if dir := os.Getenv("ALLOCD_BENCH_WASM"); dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, strings.ReplaceAll(pkg, "/", "_")+".wasm"))
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	dir := "."
	if !local {
		// The root module is wherever bench/go.mod's replace directive points.
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/allocd/allocd").Output()
		if err != nil {
			tb.Fatalf("locating the allocd module: %v", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	wasm := filepath.Join(tb.TempDir(), "guest.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", wasm, "./"+pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building %s: %v\n%s", pkg, err, b)
	}
	b, err := os.ReadFile(wasm)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkCallOverhead calls the noop guest's allocate export (it reads nothing, writes nothing
// and returns 0) through extism go-sdk and through allocd's host, in one run, so that the two
// figures are comparable. Both hosts run with a deadline on every call (the go-sdk one through
// Manifest.Timeout, which turns on WithCloseOnContextDone as allocd's host does) and both call
// one instance that was initialised (_initialize) before the timing starts.
func BenchmarkCallOverhead(b *testing.B) {
	ctx := context.Background()
	noop := buildGuest(b, "host/testdata/plugins/noop", false)

	b.Run("gosdk", func(b *testing.B) {
		manifest := extism.Manifest{
			Wasm:    []extism.Wasm{extism.WasmData{Data: noop}},
			Timeout: uint64(host.DefaultTimeout / time.Millisecond),
		}
		compiled, err := extism.NewCompiledPlugin(ctx, manifest, extism.PluginConfig{EnableWasi: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer compiled.Close(ctx)
		p, err := compiled.Instance(ctx, extism.PluginInstanceConfig{})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		call := func() {
			rc, _, err := p.Call("allocate", nil)
			if err != nil || rc != 0 {
				b.Fatalf("allocate: rc %d, %v", rc, err)
			}
		}
		call() // runs _initialize
		b.ReportAllocs()
		for b.Loop() {
			call()
		}
	})

	b.Run("allocd", func(b *testing.B) {
		rt, err := host.NewRuntime(ctx, host.Config{CacheDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer rt.Close(ctx)
		p, err := rt.Load(ctx, "noop", noop) // starts and initialises one instance
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		use := func([]byte) error { return nil }
		b.ReportAllocs()
		for b.Loop() {
			if err := p.Call(ctx, nil, nil, use); err != nil {
				b.Fatal(err)
			}
		}
	})
}
