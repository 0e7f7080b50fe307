package registry

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/wasmbuild"
)

// TestBuiltins: a built-in serves with an empty folder, a file of its name overrides it through a
// reload, removing the file brings the built-in back, and a bad file leaves the built-in serving
// while the status shows the file's error.
func TestBuiltins(t *testing.T) {
	first, plain := wasmbuild.Bytes(t, pkgFirst), wasmbuild.Bytes(t, pkgPlain)
	builtins := fstest.MapFS{"a.wasm": {Data: first}, "README.md": {Data: []byte("not a plugin")}}

	t.Run("override", func(t *testing.T) {
		f := start(t, t.TempDir(), Options{Builtins: builtins})
		if got := f.served("a"); got != host.Hash(first) {
			t.Fatalf("a served by %s, want the built-in", short(got))
		}
		if s := f.status("a"); !s.Builtin || s.File != f.path("a") || s.LastError != "" {
			t.Errorf("status of the built-in = %+v", s)
		}
		if _, ok := f.r.StatusOf("README"); ok {
			t.Error("a file that is not NAME.wasm became a plugin")
		}

		writeFile(t, f.path("a"), plain)
		f.eventFor("a", Reloaded, host.Hash(plain))
		if got := f.served("a"); got != host.Hash(plain) {
			t.Fatalf("a served by %s after the override", short(got))
		}
		if s := f.status("a"); s.Builtin || s.Reloads != 1 {
			t.Errorf("status of the override = %+v", s)
		}

		os.Remove(f.path("a"))
		f.eventFor("a", Reloaded, host.Hash(first))
		if s := f.status("a"); !s.Builtin || f.served("a") != host.Hash(first) {
			t.Errorf("status after the override was removed = %+v", s)
		}
	})

	t.Run("bad file at start", func(t *testing.T) {
		dir := t.TempDir()
		bad := []byte("this is not wasm at all, just text")
		writeFile(t, dir+"/a.wasm", bad)
		f := start(t, dir, Options{Builtins: builtins})
		if got := f.served("a"); got != host.Hash(first) {
			t.Fatalf("a served by %s, want the built-in", short(got))
		}
		s := f.status("a")
		if !s.Builtin || s.LastAttemptHash != host.Hash(bad) || s.LastError == "" || s.Failures != 1 {
			t.Errorf("status = %+v, want the built-in serving and the file's error", s)
		}
		// The bad file is not tried again on a rescan (Rescan, which retries rejected contents, would).
		f.r.enqueue(keyRescan)
		f.check("a", outSkipped)
		if s := f.status("a"); s.Failures != 1 || !s.Builtin {
			t.Errorf("after a rescan: %+v", s)
		}
	})

	t.Run("bad file and bad built-in", func(t *testing.T) {
		dir := t.TempDir()
		bad := []byte("this is not wasm at all, just text")
		writeFile(t, dir+"/a.wasm", bad)
		badBuiltin := []byte("not wasm either, a built-in this time")
		f := start(t, dir, Options{Builtins: fstest.MapFS{"a.wasm": {Data: badBuiltin}}})
		// The status names the file's rejection, which the operator mends, and adds the
		// built-in's failure; the last attempt is the built-in's.
		s := f.status("a")
		if s.ActiveHash != "" || s.Rejected == nil || s.Rejected.Hash != host.Hash(bad) || s.LastAttemptHash != host.Hash(badBuiltin) ||
			!strings.Contains(s.Warning, "a.wasm (hash "+short(host.Hash(bad))+") was rejected") || !strings.Contains(s.Warning, "the built-in a failed too: built-in load") {
			t.Errorf("status = %+v, want the file's rejection and the built-in's failure", s)
		}
	})

	t.Run("same bytes as the built-in", func(t *testing.T) {
		f := start(t, t.TempDir(), Options{Builtins: builtins})
		writeFile(t, f.path("a"), first)
		f.check("a", outUnchanged)
		if s := f.status("a"); s.Builtin || s.Reloads != 0 {
			t.Errorf("a file with the built-in's bytes: %+v", s)
		}
	})
}
