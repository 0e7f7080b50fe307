package main_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/store/storetest"
)

// TestStoreSchemaUpgradeOnOpen: allocd serve opens a data folder of schema 1 (the version before
// history records were stored in parts wrote it), says in its log that it upgraded the store,
// and serves the history it holds; the file then says schema 2, which older versions refuse.
func TestStoreSchemaUpgradeOnOpen(t *testing.T) {
	data, plugins := t.TempDir(), wasmbuild.BuiltinPlugins(t)
	d := startDaemon(t, data, plugins)
	d.must(http.StatusCreated, "PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	d.heartbeat("g", "c1", "T")
	d.poll("g", "c1", "T", 0)
	generations := func(d *daemon) []int64 {
		t.Helper()
		var h struct {
			Entries []struct {
				Generation int64 `json:"generation"`
			} `json:"entries"`
		}
		d.must(http.StatusOK, "GET", "/v1/groups/g/history?topic=T", "", &h)
		var out []int64
		for _, e := range h.Entries {
			out = append(out, e.Generation)
		}
		return out
	}
	before := generations(d)
	if len(before) == 0 {
		t.Fatal("no history before the restart")
	}
	d.stop()
	schema := func(set string) string { return storetest.BoltSchema(t, data, set) }
	if v := schema("1"); v != "2" {
		t.Fatalf("a new data folder has schema %q, want 2", v)
	}
	d = startDaemon(t, data, plugins)
	var upgraded bool
	for _, line := range strings.Split(d.stderr.String(), "\n") {
		var l struct {
			Message    string `json:"message"`
			FromSchema int    `json:"fromSchema"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Message, "store schema upgraded") && l.FromSchema == 1 {
			upgraded = true
		}
	}
	if !upgraded {
		t.Fatalf("no log line of the store's upgrade from schema 1:\n%s", d.stderr.String())
	}
	if after := generations(d); !slices.Equal(after[len(after)-len(before):], before) {
		t.Fatalf("history after the upgrade %v, before %v", after, before)
	}
	d.stop()
	if v := schema(""); v != "2" {
		t.Fatalf("schema %q after the upgrade, want 2", v)
	}
}
