package main

import (
	"io"
	"os"
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
