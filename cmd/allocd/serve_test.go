package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/ui"
)

func TestServeFlags(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("STATE_DIRECTORY", "")
	f, err := parseServeFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, ".local", "share", "allocd"); f.dataDir != want || f.pluginsDir != filepath.Join(want, "plugins") {
		t.Fatalf("default folders: data %s, plugins %s; want %s and its plugins folder", f.dataDir, f.pluginsDir, want)
	}
	if st, err := os.Stat(f.pluginsDir); err != nil || !st.IsDir() {
		t.Fatalf("the default plugin folder was not created: %v", err)
	}
	if f.listen != defaultListen || f.grace() != f.sessionTimeout || f.ui != ui.Read {
		t.Fatalf("defaults: %+v, grace %v", f, f.grace())
	}
	f, err = parseServeFlags([]string{"--restart-grace", "0", "--session-timeout", "5s"}, io.Discard)
	if err != nil || f.grace() >= 0 {
		t.Fatalf("--restart-grace 0: %v, grace %v; want disabled", err, f.grace())
	}
	f, err = parseServeFlags([]string{"--restart-grace", "90s"}, io.Discard)
	if err != nil || f.grace() != 90*time.Second {
		t.Fatalf("--restart-grace 90s: %v, grace %v", err, f.grace())
	}
	for args, want := range map[string]string{
		"--session-timeout 10ms":        "shorter than 1s",
		"--restart-grace 2h":            "outside [0, 1h0m0s]",
		"--log-format xml":              `--log-format "xml"`,
		"--debounce 1s --max-delay 1ms": "shorter than --debounce",
		"extra":                         "unexpected arguments",
		"--ui on":                       `--ui "on": want off, read or admin`,
	} {
		if _, err := parseServeFlags(strings.Fields(args), io.Discard); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("serve %s: %v, want %q", args, err, want)
		}
	}
}

func TestServeConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "c.json")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, err := readServeConfig(write(`{"topics":{"T":{"brokers":[{"name":"b","readQueues":2,"writeQueues":2}]}},"groups":{"g":{"strategy":"hash","config":{"vnodes":"5"}}}}`))
	if err != nil || cfg.Topics["T"].Brokers[0].ReadQueues != 2 || cfg.Groups["g"].Config["vnodes"] != "5" {
		t.Fatalf("config %+v, %v", cfg, err)
	}
	if _, err := readServeConfig(write(`{"topic":{}}`)); err == nil || !strings.Contains(err.Error(), `unknown field "topic"`) {
		t.Fatalf("a misspelt key: %v", err)
	}
	if _, err := readServeConfig(filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("a missing file was accepted")
	}
	if cfg, err := readServeConfig(""); err != nil || len(cfg.Topics)+len(cfg.Groups) != 0 {
		t.Fatalf("no file: %+v, %v", cfg, err)
	}
}

func TestServeEtcdFlags(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	f, err := parseServeFlags([]string{"--etcd", "http://127.0.0.1:2379, http://127.0.0.1:22379"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.etcd.urls(); len(got) != 2 || got[1] != "http://127.0.0.1:22379" || f.etcd.prefix != "/allocd/" || f.etcd.sessionTTL != DefaultSessionTTL {
		t.Fatalf("etcd flags: %+v", f.etcd)
	}
	if u, err := f.etcd.advertiseURL("127.0.0.1:7420"); err != nil || u != "http://127.0.0.1:7420" {
		t.Fatalf("advertised URL from the listen address: %q, %v", u, err)
	}
	if _, err := f.etcd.advertiseURL("[::]:7420"); err == nil || !strings.Contains(err.Error(), "--advertise-url") {
		t.Fatalf("a wildcard listen address without --advertise-url: %v", err)
	}
	for args, want := range map[string]string{
		"--etcd-cert c.pem":                                 "--etcd-cert is set but --etcd is not",
		"--etcd 127.0.0.1:2379":                             "want URLs such as",
		"--etcd http://e:2379 --etcd-session-ttl 1s":        "below etcd's minimum",
		"--etcd http://e:2379 --etcd-session-ttl 2500ms":    "whole seconds",
		"--etcd http://e:2379 --etcd-prefix allocd":         "must start and end with /",
		"--etcd http://e:2379 --etcd-cert c.pem":            "go together",
		"--etcd http://e:2379 --advertise-url 10.0.0.1:742": "--advertise-url",
	} {
		if _, err := parseServeFlags(strings.Fields(args), io.Discard); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("serve %s: %v, want %q", args, err, want)
		}
	}
}

// The daemon speaks to etcd as a client; the etcd server stays out of the binary.
func TestBinaryDoesNotLinkTheEtcdServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := string(out)
	if !strings.Contains(deps, "go.etcd.io/etcd/client/v3/concurrency") {
		t.Fatal("the etcd client is not among the dependencies: is this list of the daemon's?")
	}
	for _, l := range strings.Split(deps, "\n") {
		if strings.HasPrefix(l, "go.etcd.io/etcd/server/") {
			t.Fatalf("the daemon links the etcd server: %s", l)
		}
	}
}
