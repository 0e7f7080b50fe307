package registry

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/wasmbuild"
)

// A rejected (or missing, or empty) file was a trap at restart: the old version served only
// from memory, so after a restart the groups bound to the plugin had nothing. The last version
// that passed validation is kept and serves after a restart, and the status says so loudly.
func TestKeptVersionServesAfterRestart(t *testing.T) {
	first := wasmbuild.Bytes(t, pkgFirst)
	for _, c := range []struct {
		name   string
		damage func(path string)
		reason string
	}{
		{"rejected", func(p string) { writeFile(t, p, []byte("\x00asm\x01\x00\x00\x00\x01\x09garbage")) }, "runs past the end"},
		{"empty", func(p string) { writeFile(t, p, nil) }, "empty"},
		{"removed", func(p string) { os.Remove(p) }, "missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			keeper, err := NewDirKeeper(filepath.Join(t.TempDir(), "plugins-good"))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "a.wasm"), first)
			opts := Options{Keeper: keeper, InUse: func(name string) bool { return name == "a" }}
			f := start(t, dir, opts)
			if b, h, ok, err := keeper.Kept("a"); !ok || err != nil || h != host.Hash(first) || !bytes.Equal(b, first) {
				t.Fatalf("kept after the load: %v %s %v", ok, short(h), err)
			}
			if b, h, err := f.r.Module("a"); err != nil || h != host.Hash(first) || !bytes.Equal(b, first) {
				t.Fatalf("Module: %s %v", short(h), err)
			}
			f.stop()

			c.damage(filepath.Join(dir, "a.wasm"))
			f = start(t, dir, opts)
			if got := f.served("a"); got != host.Hash(first) {
				t.Fatalf("after the restart a is served by %s", short(got))
			}
			s := f.status("a")
			if !s.Kept || !strings.Contains(s.Warning, keeper.Path("a", host.Hash(first))) || !strings.Contains(s.Warning, c.reason) {
				t.Errorf("status does not say the kept version serves, and why: %+v", s)
			}
			if _, h, err := f.r.Module("a"); err != nil || h != host.Hash(first) {
				t.Errorf("Module after the restart: %s %v", short(h), err)
			}
			// The file is mended: the same bytes serve from it again, and the warning goes.
			writeFile(t, filepath.Join(dir, "a.wasm"), first)
			f.check("a", outUnchanged)
			if s := f.status("a"); s.Kept || s.Warning != "" || s.LastError != "" || s.Rejected != nil {
				t.Errorf("after the file was mended: %+v", s)
			}
		})
	}
}

// lastError stayed after a good version came back; the rejection is named while the file holds
// it, and the history keeps it after.
func TestRejectionClearedWhenGoodReturns(t *testing.T) {
	first := wasmbuild.Bytes(t, pkgFirst)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.wasm"), first)
	f := start(t, dir, Options{})
	bad := []byte("this is not wasm")
	writeFile(t, f.path("a"), bad)
	f.eventFor("a", Failed, host.Hash(bad))
	s := f.status("a")
	if s.Rejected == nil || s.Rejected.Hash != host.Hash(bad) || s.LastError == "" || !strings.Contains(s.Warning, short(host.Hash(bad))) {
		t.Fatalf("status after the rejection: %+v", s)
	}
	writeFile(t, f.path("a"), first)
	f.check("a", outUnchanged)
	s = f.status("a")
	if s.Rejected != nil || s.LastError != "" || s.Warning != "" {
		t.Fatalf("status after the good version came back: %+v", s)
	}
	var kinds []string
	for _, e := range s.History {
		kinds = append(kinds, string(e.Kind))
	}
	if strings.Join(kinds, ",") != "loaded,failed,restored" {
		t.Errorf("history %v", kinds)
	}
}

// A dangling symlink was ignored silently.
func TestDanglingSymlinkReported(t *testing.T) {
	dir := t.TempDir()
	mustSymlink(t, filepath.Join(dir, "nowhere.wasm"), filepath.Join(dir, "a.wasm"))
	f := start(t, dir, Options{})
	s := f.status("a")
	if !strings.Contains(s.LastError, "symlink") || !strings.Contains(s.LastError, "nowhere.wasm") {
		t.Fatalf("status of a dangling symlink: %+v", s)
	}
}

// Replacing the folder (rm -rf and mkdir, or mv and mkdir) stopped hot reload until a restart.
func TestFolderReplaced(t *testing.T) {
	first := wasmbuild.Bytes(t, pkgFirst)
	for _, how := range []string{"removed", "renamed"} {
		t.Run(how, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "plugins")
			os.Mkdir(dir, 0o755)
			writeFile(t, filepath.Join(dir, "a.wasm"), first)
			f := start(t, dir, Options{FolderPoll: 20 * time.Millisecond})
			if how == "removed" {
				os.RemoveAll(dir)
			} else {
				os.Rename(dir, filepath.Join(parent, "old"))
			}
			if how == "removed" {
				f.eventFor("a", Removed, host.Hash(first)) // rm -rf removes the files first
			}
			os.Mkdir(dir, 0o755)
			writeFile(t, filepath.Join(dir, "b.wasm"), first)
			// The rescan of the new folder finds b, and (after a rename, whose files moved
			// away without events) that a is gone.
			if how == "renamed" {
				f.eventFor("a", Removed, host.Hash(first))
			}
			f.eventFor("b", Loaded, host.Hash(first))
			// And the new folder is watched: a file written later loads too.
			writeFile(t, filepath.Join(dir, "c.wasm"), first)
			f.eventFor("c", Loaded, host.Hash(first))
		})
	}
}
