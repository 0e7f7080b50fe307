package main_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/plugins/circle"
)

type pluginState struct {
	Name       string `json:"name"`
	File       string `json:"file"`
	Builtin    bool   `json:"builtin"`
	ActiveHash string `json:"activeHash"`
}

// TestServeFromAnyFolder: `allocd serve` with no flags but an address, started in an empty folder,
// keeps its state in the user's data folder and serves the built-in plugins from the binary; a
// file dropped into DATA-DIR/plugins overrides the built-in of its name, and removing it brings
// the built-in back.
func TestServeFromAnyFolder(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	d := execDaemon(t, []string{"--cache-dir", filepath.Join(os.TempDir(), "allocd-test-cache"),
		"--debounce", "50ms", "--log-format", "json"}, func(cmd *exec.Cmd) {
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME=", "STATE_DIRECTORY=")
	})
	d.waitReady(3 * time.Minute) // it listens before its plugins are loaded

	dataDir := filepath.Join(home, ".local", "share", "allocd")
	pluginsDir := filepath.Join(dataDir, "plugins")
	plugins := func() map[string]pluginState {
		var list struct{ Plugins []pluginState }
		d.must(http.StatusOK, "GET", "/v1/plugins", "", &list)
		m := map[string]pluginState{}
		for _, p := range list.Plugins {
			m[p.Name] = p
		}
		return m
	}
	ps := plugins()
	for _, name := range []string{"averagely", "circle", "hash", "sticky"} {
		if p := ps[name]; !p.Builtin || p.ActiveHash == "" || p.File != filepath.Join(pluginsDir, name+".wasm") {
			t.Errorf("plugin %s: %+v, want the built-in serving, overridable at %s", name, p, pluginsDir)
		}
	}
	if ents, _ := os.ReadDir(cwd); len(ents) != 0 {
		t.Errorf("serve wrote into the folder it started in: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "allocd.db")); err != nil {
		t.Errorf("no store in the user's data folder: %v", err)
	}

	d.must(http.StatusCreated, "PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":8,"writeQueues":8}]}`, nil)
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", `{"strategy":"averagely","config":{},"model":"clustering","delivery":"queue"}`, nil)
	cids := []string{"c1", "c2", "c3"}
	for _, cid := range cids {
		d.heartbeat("g", cid, "T")
	}
	d.beat("g", cids...)
	gen := d.checkAssignment(0, native(averagely.Allocate, 8, cids...))

	// circle's module dropped in as averagely.wasm overrides the built-in averagely.
	circleWasm, err := os.ReadFile(filepath.Join(wasmbuild.BuiltinPlugins(t), "circle.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(circleWasm)
	circleHash := hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(pluginsDir, "averagely.wasm"), circleWasm, 0o644); err != nil {
		t.Fatal(err)
	}
	waitPlugin := func(name string, ok func(pluginState) bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); ; {
			if p := plugins()[name]; ok(p) {
				return
			} else if time.Now().After(deadline) {
				t.Fatalf("plugin %s is still %+v", name, p)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitPlugin("averagely", func(p pluginState) bool { return !p.Builtin && p.ActiveHash == circleHash })
	gen = d.checkAssignment(gen, native(circle.Allocate, 8, cids...))

	if err := os.Remove(filepath.Join(pluginsDir, "averagely.wasm")); err != nil {
		t.Fatal(err)
	}
	waitPlugin("averagely", func(p pluginState) bool { return p.Builtin && p.ActiveHash == ps["averagely"].ActiveHash })
	d.checkAssignment(gen, native(averagely.Allocate, 8, cids...))
}

// TestToolsUseBuiltins: `allocd allocate --plugin NAME` and `allocd check NAME`, run from an empty
// folder with no plugin folder, find the built-in NAME; a file of that name in the default plugin
// folder (DATA-DIR/plugins) overrides it, as in the daemon.
func TestToolsUseBuiltins(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(wasmbuild.Allocd(t), args...)
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME=", "STATE_DIRECTORY=")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	line := `{"group":"g","mqAll":[{"topic":"T","brokerName":"b","queueId":0},{"topic":"T","brokerName":"b","queueId":1},{"topic":"T","brokerName":"b","queueId":2}],"cidAll":["c1","c2"]}` + "\n"
	avg := `{"assignment":{"c1":[{"topic":"T","brokerName":"b","queueId":0},{"topic":"T","brokerName":"b","queueId":1}],"c2":[{"topic":"T","brokerName":"b","queueId":2}]}}`
	if out, err := run(line, "allocate", "--plugin", "averagely"); err != nil || strings.TrimSpace(out) != avg {
		t.Fatalf("allocate with the built-in averagely: %v\n%s", err, out)
	}
	if out, err := run("", "check", "circle", "--scenarios", "3"); err != nil || !strings.Contains(out, "plugin     circle 1.0.0") || !strings.Contains(out, "\nPASS") {
		t.Fatalf("check of the built-in circle: %v\n%s", err, out)
	}
	// circle's module as averagely.wasm in the default plugin folder wins over the built-in.
	b, err := os.ReadFile(filepath.Join(wasmbuild.BuiltinPlugins(t), "circle.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, ".local", "share", "allocd", "plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "averagely.wasm"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	circle := `{"assignment":{"c1":[{"topic":"T","brokerName":"b","queueId":0},{"topic":"T","brokerName":"b","queueId":2}],"c2":[{"topic":"T","brokerName":"b","queueId":1}]}}`
	if out, err := run(line, "allocate", "--plugin", "averagely"); err != nil || strings.TrimSpace(out) != circle {
		t.Fatalf("allocate with the folder's averagely.wasm: %v\n%s", err, out)
	}
	if out, err := run("", "check", "nosuch"); err == nil || !strings.Contains(out, `plugin "nosuch": no file `+filepath.Join(dir, "nosuch.wasm")+" and no built-in plugin of that name (built-in: averagely, circle, ") {
		t.Fatalf("an unknown plugin: %v\n%s", err, out)
	}
}
