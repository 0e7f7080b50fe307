package etcdtest

import (
	"context"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, e *Etcd, key string, timeout time.Duration) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := e.Client(t).Get(ctx, key)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// The member keeps its data and its URL across Stop/Start and Kill/Start, and is unavailable
// while stopped.
func TestStopStartKeepsData(t *testing.T) {
	e := Start(t)
	cli := e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	url := e.Endpoints()[0]
	e.Stop()
	if _, err := get(t, e, "k", 500*time.Millisecond); err == nil {
		t.Fatal("a read succeeded while etcd was stopped")
	}
	e.Start()
	if e.Endpoints()[0] != url {
		t.Fatalf("URL changed across a restart: %s, then %s", url, e.Endpoints()[0])
	}
	// The client made before the stop reconnects.
	if _, err := cli.Put(ctx, "k2", "v2"); err != nil {
		t.Fatal(err)
	}
	e.Kill()
	e.Start()
	for k, want := range map[string]string{"k": "v1", "k2": "v2"} {
		if got, err := get(t, e, k, 10*time.Second); err != nil || got != want {
			t.Fatalf("after restarts %s = %q, %v; want %q", k, got, err, want)
		}
	}
}

func TestNoBinaryTellsHowToGetOne(t *testing.T) {
	t.Setenv(EnvBin, "/nonexistent/etcd-test")
	_, err := Bin()
	if err == nil || !strings.Contains(err.Error(), "make test") || !strings.Contains(err.Error(), EnvBin) {
		t.Fatalf("Bin with a missing binary: %v", err)
	}
	t.Setenv(EnvBin, "")
	t.Setenv("PATH", t.TempDir())
	if _, err := Bin(); err == nil || !strings.Contains(err.Error(), "apt-get install etcd-server") {
		t.Fatalf("Bin with none: %v", err)
	}
}
