package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/allocd/allocd/internal/wasmbuild"
)

// TestCPluginChecked: the C plugin of examples/weighted-c passes `allocd check` and answers
// exactly what the Go plugin of `allocd init-plugin` answers (--reference), weights and all.
func TestCPluginChecked(t *testing.T) {
	c, g := wasmbuild.Example(t, "weighted-c"), wasmbuild.Scaffold(t)
	out, err := exec.Command(wasmbuild.Allocd(t), "check", c, "--reference", g, "--scenarios", "40",
		"--cache-dir", filepath.Join(os.TempDir(), "allocd-test-cache")).CombinedOutput()
	if err != nil {
		t.Fatalf("allocd check weighted-c --reference the scaffold: %v\n%s", err, out)
	}
	for _, want := range []string{"plugin     weighted-c 0.1.0 (ABI 1.0), promises balanced, weighted", "\nbalance      ok: ", "\nreference    ok: ", "\nPASS"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
}

// TestCPluginServed: the daemon loads the C plugin from its plugin folder and a group bound to
// it gets queues by the weight labels its members send in their heartbeats.
func TestCPluginServed(t *testing.T) {
	plugins := t.TempDir()
	b, err := os.ReadFile(wasmbuild.Example(t, "weighted-c"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "weighted-c.wasm"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, t.TempDir(), plugins)
	d.must(http.StatusCreated, "PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":8,"writeQueues":8}]}`, nil)
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", `{"strategy":"weighted-c","config":{},"model":"clustering","delivery":"queue"}`, nil)
	weights := map[string]string{"c1": "3", "c2": "1"}
	for cid, w := range weights {
		body, _ := json.Marshal(map[string]any{"cid": cid, "topics": []string{"T"}, "labels": map[string]string{"weight": w, "zone": "a"}})
		d.must(http.StatusOK, "POST", "/v1/groups/g/heartbeat", string(body), nil)
	}
	// Shares of 8 queues by weights 3 and 1: 6 and 2, contiguous, in consumer order.
	want := map[string][]int32{"c1": {0, 1, 2, 3, 4, 5}, "c2": {6, 7}}
	for cid, w := range want {
		a := d.poll("g", cid, "T", 0)
		if got := ids(a.Assignment["T"]); !slices.Equal(got, w) {
			t.Errorf("%s (weight %s) has queues %v, want %v", cid, weights[cid], got, w)
		}
	}
	var st struct {
		Name    string `json:"name"`
		Builtin bool   `json:"builtin"`
		Stats   struct {
			Calls int64 `json:"calls"`
		} `json:"stats"`
	}
	d.must(http.StatusOK, "GET", "/v1/plugins/weighted-c", "", &st)
	if st.Name != "weighted-c" || st.Builtin || st.Stats.Calls == 0 {
		t.Errorf("plugin status %s", fmt.Sprint(st))
	}
}
