// Package daemontest runs the real allocd binary for tests of the code that talks to it (the
// strategy package's daemon source, the adapters' authoritative mode).
package daemontest

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allocd/allocd/internal/wasmbuild"
)

// Daemon is a running `allocd serve`.
type Daemon struct {
	URL    string
	cmd    *exec.Cmd
	exited chan struct{}
	once   sync.Once
	mu     sync.Mutex
	stderr bytes.Buffer
}

func (d *Daemon) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.Write(p)
}

// Log is what the daemon has written to stderr.
func (d *Daemon) Log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.String()
}

// Kill stops the daemon with SIGKILL and waits for it; later calls do nothing.
func (d *Daemon) Kill() { d.once.Do(func() { d.cmd.Process.Kill(); <-d.exited }) }

// Start runs allocd serve on a fresh data folder with the plugins of pluginsDir, compiled code
// cached in cacheDir, and waits until it is ready (its plugins loaded). The test's cleanup kills it.
func Start(t testing.TB, pluginsDir, cacheDir string, extra ...string) *Daemon {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--addr-file", addrFile,
		"--data-dir", t.TempDir(), "--plugins-dir", pluginsDir, "--cache-dir", cacheDir,
		"--debounce", "50ms"}, extra...)
	d := &Daemon{exited: make(chan struct{})}
	d.cmd = exec.Command(wasmbuild.Allocd(t), args...)
	d.cmd.Stderr = d
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.Kill()
		if t.Failed() {
			t.Logf("allocd serve log:\n%s", d.Log())
		}
	})
	deadline := time.Now().Add(5 * time.Minute) // the first run compiles the plugins
	for {
		if d.URL == "" {
			if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
				d.URL = "http://" + strings.TrimSpace(string(b))
			}
		}
		// The daemon listens before its plugins are loaded; it is ready once /readyz says so.
		if d.URL != "" && ready(d.URL) {
			return d
		}
		select {
		case <-d.exited:
			t.Fatalf("allocd serve exited:\n%s", d.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("allocd serve was not ready in time:\n%s", d.Log())
		}
	}
}

// ready tells whether the daemon at url answers /readyz with 200.
func ready(url string) bool {
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
