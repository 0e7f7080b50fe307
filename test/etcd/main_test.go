package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary plays etcd-test when this is set, so the test runs the real main.
func TestMain(m *testing.M) {
	if os.Getenv("ETCD_TEST_CHILD") != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func startChild(t *testing.T, dir, client string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "--data-dir", dir, "--listen-client", client, "--log-level", "fatal")
	cmd.Env = append(os.Environ(), "ETCD_TEST_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("no ready line: %v", sc.Err())
	}
	url, ok := strings.CutPrefix(sc.Text(), "ready ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") || strings.HasSuffix(url, ":0") {
		t.Fatalf("ready line %q", sc.Text())
	}
	return cmd, url
}

func healthy(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/health: %s", resp.Status)
	}
}

// The member reports its resolved URL, serves, stops on SIGTERM within the close's bound, and
// comes back on the same data folder and URL.
func TestReadyStopRestart(t *testing.T) {
	dir := t.TempDir()
	cmd, url := startChild(t, dir, "http://127.0.0.1:0")
	healthy(t, url)
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s after SIGTERM")
	}
	_, url2 := startChild(t, dir, url)
	if url2 != url {
		t.Fatalf("restart on %s reported %s", url, url2)
	}
	healthy(t, url2)
}
