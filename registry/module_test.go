package registry

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/wasmbuild"
)

// Only limits the registry to the names it accepts, and Module serves the bytes of the version
// in force.
func TestOnlyAndModule(t *testing.T) {
	dir := t.TempDir()
	first := wasmbuild.Bytes(t, pkgFirst)
	writeFile(t, filepath.Join(dir, "a.wasm"), first)
	writeFile(t, filepath.Join(dir, "b.wasm"), withSection(first, 1))
	f := start(t, dir, Options{Only: func(name string) bool { return name == "a" }})
	if st := f.r.Status(); len(st) != 1 || st[0].Name != "a" {
		t.Fatalf("Status = %+v, want only a", st)
	}
	wasm, hash, err := f.r.Module("a")
	if err != nil || hash != host.Hash(first) || host.Hash(wasm) != hash {
		t.Fatalf("Module(a) = %d bytes, %s, %v; want a's module and hash", len(wasm), hash, err)
	}
	if _, _, err := f.r.Module("b"); err == nil {
		t.Fatal("Module(b) served a plugin Only refused")
	}
}

// Check judges a module by the registry's rule: a module that fails its self-test is refused
// with the stage named, a good one passes, and validate runs last.
func TestCheck(t *testing.T) {
	rt := testRuntime(t)
	ctx := context.Background()
	if err := Check(ctx, rt, "a", wasmbuild.Bytes(t, pkgFirst), nil); err != nil {
		t.Fatalf("a good module: %v", err)
	}
	if err := Check(ctx, rt, "t", wasmbuild.Bytes(t, "host/testdata/plugins/trap"), nil); err == nil || !strings.HasPrefix(err.Error(), "self-test: ") {
		t.Fatalf("a trapping module: %v, want a self-test error", err)
	}
	refuse := func(context.Context, *host.Plugin) error { return errRefused }
	if err := Check(ctx, rt, "a", wasmbuild.Bytes(t, pkgFirst), refuse); err == nil || !strings.HasPrefix(err.Error(), "validate: ") {
		t.Fatalf("a refused module: %v, want a validate error", err)
	}
	if err := Check(ctx, rt, "g", []byte("\x00asm garbage"), nil); err == nil {
		t.Fatal("garbage passed")
	}
}

var errRefused = errorString("refused")

type errorString string

func (e errorString) Error() string { return string(e) }
