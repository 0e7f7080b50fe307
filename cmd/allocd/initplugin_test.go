package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/internal/wasmbuild"
)

// TestInitPlugin runs the scaffold as a new user would: init-plugin, the module's own native
// tests, its wasm build and `make check` (allocd check), all from the files as written, with the
// SDK copy the binary wrote and no network.
func TestInitPlugin(t *testing.T) {
	bin := wasmbuild.Allocd(t)
	dir := filepath.Join(t.TempDir(), "my-weights")
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out, err := exec.Command(bin, "init-plugin", dir, "--name", "weights").CombinedOutput(); err != nil {
		t.Fatalf("init-plugin: %v\n%s", err, out)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"module weights\n", "require github.com/allocd/allocd ", "replace github.com/allocd/allocd => ./allocd-sdk", "not on a public module proxy"} {
		if !strings.Contains(string(gomod), want) {
			t.Errorf("go.mod lacks %q:\n%s", want, gomod)
		}
	}
	for _, f := range []string{"main.go", "main_test.go", "Makefile", "README.md", "allocd-sdk/go.mod", "allocd-sdk/abi/plugin/plugin.go", "allocd-sdk/abi/view.go"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("init-plugin wrote no %s: %v", f, err)
		}
	}
	if tests, _ := filepath.Glob(filepath.Join(dir, "allocd-sdk", "abi", "*_test.go")); len(tests) > 0 {
		t.Errorf("the SDK copy carries tests: %v", tests)
	}

	if out := run("make", "test"); !strings.Contains(out, "ok") {
		t.Errorf("make test: %s", out)
	}
	run("make")
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		if b, _ := os.ReadFile(filepath.Join(dir, "go.sum")); len(b) > 0 {
			t.Errorf("the plugin's go.sum carries dependencies:\n%s", b)
		}
	}
	out := run("make", "check", "ALLOCD="+bin)
	for _, want := range []string{fmt.Sprintf("plugin     weights 0.1.0 (ABI %d.%d), promises balanced, weighted", abi.Major, abi.Minor), "\nbalance      ok: ", "weighted share", "\nPASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("allocd check of the scaffold lacks %q:\n%s", want, out)
		}
	}

	// A second run refuses to write over the module; a bad name is refused before anything.
	if out, err := exec.Command(bin, "init-plugin", dir).CombinedOutput(); err == nil || !strings.Contains(string(out), "is not empty") {
		t.Errorf("init-plugin into a full folder: %v\n%s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "x")
	if out, err := exec.Command(bin, "init-plugin", bad, "--name", "Bad Name").CombinedOutput(); err == nil || !strings.Contains(string(out), `plugin name "Bad Name"`) {
		t.Errorf("a bad name: %v\n%s", err, out)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Errorf("a refused init-plugin created %s", bad)
	}
}
