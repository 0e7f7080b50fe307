// Package wasmbuild compiles Go plugin sources to WebAssembly for tests and benchmarks, the way
// `make plugins` does (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared). Each package is built once
// per process; the go command's own cache makes later processes fast.
package wasmbuild

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	mu    sync.Mutex
	built = map[string]string{}
	dir   string
)

// Path builds the package at pkg (a path relative to the module root, such as
// "host/testdata/plugins/trap" or "plugins/averagely/wasm") and returns the .wasm file's path.
func Path(tb testing.TB, pkg string) string {
	tb.Helper()
	p, err := build(pkg)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Build is Path for code without a testing.TB (Example functions): it returns the error.
func Build(pkg string) (string, error) { return build(pkg) }

// Bytes is Path, returning the module's bytes.
func Bytes(tb testing.TB, pkg string) []byte {
	tb.Helper()
	b, err := os.ReadFile(Path(tb, pkg))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Root returns the module's root folder.
func Root() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("wasmbuild: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("wasmbuild: not inside a Go module")
	}
	// The adapters are modules of their own inside the repository: walk up to the core's.
	for dir := filepath.Dir(mod); ; {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/allocd/allocd\n") {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("wasmbuild: %s is not inside the allocd repository", mod)
		}
		dir = up
	}
}

// Plugin returns the .wasm file of built-in plugin name: $ALLOCD_PLUGINS/name.wasm when
// ALLOCD_PLUGINS is set (`make test` sets it), otherwise plugins/name/wasm built here.
func Plugin(tb testing.TB, name string) string {
	tb.Helper()
	if d := os.Getenv("ALLOCD_PLUGINS"); d != "" {
		return filepath.Join(d, name+".wasm")
	}
	return Path(tb, "plugins/"+name+"/wasm")
}

func build(pkg string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if p, ok := built[pkg]; ok {
		return p, nil
	}
	root, err := Root()
	if err != nil {
		return "", err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "allocd-wasm-"); err != nil {
			return "", err
		}
	}
	out := filepath.Join(dir, strings.ReplaceAll(pkg, "/", "_")+".wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "./"+pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("wasmbuild: building %s: %v\n%s", pkg, err, stderr.String())
	}
	built[pkg] = out
	return out, nil
}

// Cleanup removes the built modules; call it from TestMain after the tests ran.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
		dir, built = "", map[string]string{}
	}
}

// BuiltinPlugins returns a folder holding NAME.wasm for every built-in plugin: $ALLOCD_PLUGINS
// when set (`make test` sets it to build/plugins), otherwise a folder built here.
func BuiltinPlugins(tb testing.TB) string {
	tb.Helper()
	if d := os.Getenv("ALLOCD_PLUGINS"); d != "" {
		return d
	}
	root, err := Root()
	if err != nil {
		tb.Fatal(err)
	}
	mains, _ := filepath.Glob(filepath.Join(root, "plugins", "*", "wasm", "main.go"))
	mu.Lock()
	if dir == "" {
		if dir, err = os.MkdirTemp("", "allocd-wasm-"); err != nil {
			mu.Unlock()
			tb.Fatal(err)
		}
	}
	out := filepath.Join(dir, "builtin")
	mu.Unlock()
	if err := os.MkdirAll(out, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, m := range mains {
		name := filepath.Base(filepath.Dir(filepath.Dir(m)))
		b := Bytes(tb, "plugins/"+name+"/wasm")
		if err := os.WriteFile(filepath.Join(out, name+".wasm"), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// Allocd returns the path of the allocd binary: $ALLOCD_BIN when set (`make test` sets it),
// otherwise one built here.
func Allocd(tb testing.TB) string {
	tb.Helper()
	if b := os.Getenv("ALLOCD_BIN"); b != "" {
		return b
	}
	root, err := Root()
	if err != nil {
		tb.Fatal(err)
	}
	mu.Lock()
	p, ok := built["allocd"]
	mu.Unlock()
	if ok {
		return p
	}
	// As make does, the binary embeds the built-in plugins (internal/builtin).
	embedBuiltins(tb, root)
	mu.Lock()
	defer mu.Unlock()
	if p, ok := built["allocd"]; ok {
		return p
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "allocd-wasm-"); err != nil {
			tb.Fatal(err)
		}
	}
	out := filepath.Join(dir, "allocd")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/allocd")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building allocd: %v\n%s", err, b)
	}
	built["allocd"] = out
	return out
}

// embedBuiltins puts the built-in plugins into internal/builtin/wasm, where `make embed` puts
// them (a folder of build output the repository ignores), each file written through a rename so
// that test processes doing the same at once never see half a file.
func embedBuiltins(tb testing.TB, root string) {
	tb.Helper()
	src := BuiltinPlugins(tb)
	dst := filepath.Join(root, "internal", "builtin", "wasm")
	files, _ := filepath.Glob(filepath.Join(src, "*.wasm"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		target := filepath.Join(dst, filepath.Base(f))
		if old, err := os.ReadFile(target); err == nil && bytes.Equal(old, b) {
			continue
		}
		tmp, err := os.CreateTemp(dst, ".embed-*")
		if err != nil {
			tb.Fatal(err)
		}
		_, werr := tmp.Write(b)
		cerr := tmp.Close()
		if werr != nil || cerr != nil {
			os.Remove(tmp.Name())
			tb.Fatalf("writing %s: %v %v", target, werr, cerr)
		}
		if err := os.Rename(tmp.Name(), target); err != nil {
			os.Remove(tmp.Name())
			tb.Fatal(err)
		}
	}
}

// Example returns the module of examples/NAME, a plugin in another language built by its own
// Makefile: $ALLOCD_EXAMPLES/NAME.wasm when set (`make test` sets it to build/examples),
// otherwise one built here with `make -C examples/NAME` (which says what to install when the
// toolchain is missing).
func Example(tb testing.TB, name string) string {
	tb.Helper()
	if d := os.Getenv("ALLOCD_EXAMPLES"); d != "" {
		return filepath.Join(d, name+".wasm")
	}
	root, err := Root()
	if err != nil {
		tb.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	key := "example/" + name
	if p, ok := built[key]; ok {
		return p
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "allocd-wasm-"); err != nil {
			tb.Fatal(err)
		}
	}
	out := filepath.Join(dir, "example-"+name+".wasm")
	cmd := exec.Command("make", "--no-print-directory", "-C", filepath.Join(root, "examples", name), "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building examples/%s: %v\n%s", name, err, b)
	}
	built[key] = out
	return out
}

// Scaffold returns the module that `allocd init-plugin` writes, built against this checkout
// (--sdk): the Go plugin that examples/weighted-c mirrors.
func Scaffold(tb testing.TB) string {
	tb.Helper()
	bin := Allocd(tb)
	root, err := Root()
	if err != nil {
		tb.Fatal(err)
	}
	mu.Lock()
	p, ok := built["scaffold"]
	mu.Unlock()
	if ok {
		return p
	}
	src, err := os.MkdirTemp("", "allocd-scaffold-")
	if err != nil {
		tb.Fatal(err)
	}
	mod := filepath.Join(src, "weighted")
	if b, err := exec.Command(bin, "init-plugin", mod, "--sdk", root).CombinedOutput(); err != nil {
		tb.Fatalf("allocd init-plugin: %v\n%s", err, b)
	}
	cmd := exec.Command("make", "--no-print-directory", "-C", mod, "wasm")
	// The checkout's module requires the daemon's dependencies, whose sums the new go.sum lacks.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building the scaffold: %v\n%s", err, b)
	}
	out := filepath.Join(mod, "weighted.wasm")
	mu.Lock()
	built["scaffold"] = out
	mu.Unlock()
	return out
}

// GuestTests runs the tests named in tests (exact names, fuzz targets over their seeds) of the
// package at pkg (a path relative to the module root, such as "abi") in a wasm guest: the
// package's tests compiled with GOOS=wasip1 and run by wazero, the runtime the daemon's host is
// built on, with its optimizing compiler. The module's folder is the guest's root, read-only,
// and the package's folder its working directory, so testdata is where the tests look. Each test
// must pass; a test that did not run is a failure too. Code written in WebAssembly for the guest
// (a _wasm.s file) is checked this way.
func GuestTests(t *testing.T, pkg string, tests []string) {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "guest.test.wasm")
	cmd := exec.Command("go", "test", "-c", "-o", bin, "./"+pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s's tests for the guest: %v\n%s", pkg, err, out)
	}
	// wazero's own command, built without the race detector, under which compiling the guest
	// takes a minute instead of seconds; its version is the one the daemon's host uses (go.mod).
	cmd = exec.Command("go", "run", "github.com/tetratelabs/wazero/cmd/wazero", "run",
		"-cachedir", filepath.Join(os.TempDir(), "allocd-test-cache", "wazero-cli"),
		"-mount", root+":/:ro", "-env", "PWD=/"+pkg,
		bin, "-test.v", "-test.run", "^("+strings.Join(tests, "|")+")$")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s's tests in the guest: %v\n%s", pkg, err, out)
	}
	for _, name := range tests {
		if !bytes.Contains(out, []byte("--- PASS: "+name+" ")) {
			t.Errorf("the guest did not pass %s:\n%s", name, out)
		}
	}
}
