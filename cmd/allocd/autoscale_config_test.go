package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/store"
)

type noAllocator struct{}

func (noAllocator) Allocate(context.Context, string, *abi.Request) (*abi.Response, string, error) {
	return nil, "", errors.New("no plugins here")
}

func TestServeConfigAutoscale(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.json")
	os.WriteFile(p, []byte(`{"topics":{"T":{"brokers":[{"name":"b","readQueues":2,"writeQueues":2}],
		"autoscale":{"enabled":true,"max":16,"shrinkReadDelay":"2m"}}}}`), 0o644)
	cfg, err := readServeConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(dir, "data"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := coordinator.New(coordinator.Options{Store: st, Allocator: noAllocator{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.apply(c); err != nil {
		t.Fatal(err)
	}
	tp, err := c.Topic("T")
	if err != nil || tp.Autoscale == nil || !tp.Autoscale.Enabled || tp.Autoscale.Max != 16 ||
		tp.Autoscale.ShrinkReadDelay != 2*time.Minute || tp.Autoscale.ExpandWriteDelay != 10*time.Second {
		t.Fatalf("topic from the config: %+v %v", tp.Autoscale, err)
	}
	os.WriteFile(p, []byte(`{"topics":{"T":{"brokers":[{"name":"b","readQueues":2,"writeQueues":2}],"autoscale":{"max":0}}}}`), 0o644)
	if cfg, err = readServeConfig(p); err != nil {
		t.Fatal(err)
	}
	if err := cfg.apply(c); err == nil || !strings.Contains(err.Error(), `topic "T": autoscale: policy max 0 below min 1`) {
		t.Fatalf("a bad policy in the config: %v", err)
	}
}
