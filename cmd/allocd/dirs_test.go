package main

import (
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestDefaultDataDir: the default data folder never depends on the working folder: systemd's
// $STATE_DIRECTORY first, then $XDG_DATA_HOME, then ~/.local/share; with no home at all, serve
// refuses to start and says --data-dir is required.
func TestDefaultDataDir(t *testing.T) {
	if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		t.Skip("the XDG rules are those of Linux and the BSDs")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, tc := range []struct{ state, xdg, want string }{
		{"", "", filepath.Join(home, ".local", "share", "allocd")},
		{"", "/srv/xdg", "/srv/xdg/allocd"},
		{"", "relative/xdg", filepath.Join(home, ".local", "share", "allocd")}, // XDG says: ignore a relative path
		{"/var/lib/allocd:/var/lib/other", "/srv/xdg", "/var/lib/allocd"},
	} {
		t.Setenv("STATE_DIRECTORY", tc.state)
		t.Setenv("XDG_DATA_HOME", tc.xdg)
		if got, err := defaultDataDir(); err != nil || got != tc.want {
			t.Errorf("STATE_DIRECTORY=%q XDG_DATA_HOME=%q: %q, %v; want %q", tc.state, tc.xdg, got, err, tc.want)
		}
	}
	t.Setenv("STATE_DIRECTORY", "")
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "")
	if _, err := parseServeFlags(nil, io.Discard); err == nil || !strings.Contains(err.Error(), "--data-dir is required: there is no default data folder") {
		t.Errorf("no home and no --data-dir: %v", err)
	}
	dir := t.TempDir()
	f, err := parseServeFlags([]string{"--data-dir", dir}, io.Discard)
	if err != nil || f.pluginsDir != filepath.Join(dir, "plugins") {
		t.Errorf("--data-dir %s: plugins folder %q, %v", dir, f.pluginsDir, err)
	}
}
