package registry

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/allocd/allocd/host"
)

// Keeper holds the last validated version of each plugin, so that a restart can serve it when
// the plugin's file is missing, empty or rejected: without it, a bad file in the folder would
// leave every group bound to the plugin with nothing after the next restart. DirKeeper keeps
// them in a folder; a shared store (etcd) can implement the same four methods.
type Keeper interface {
	// Keep records module, whose content hash is hash, as the last validated version of
	// plugin name, replacing the one kept before. It is durable when it returns.
	Keep(name, hash string, module []byte) error
	// Kept returns the version kept for name; ok is false when there is none.
	Kept(name string) (module []byte, hash string, ok bool, err error)
	// Forget drops the version kept for name (none is not an error).
	Forget(name string) error
	// Names lists the plugins that have a kept version.
	Names() ([]string, error)
}

// DirKeeper is a Keeper over a folder: NAME-HASH.wasm per plugin, each written to a temporary
// file, synced and renamed into place, so a crash leaves the old version or the new one.
type DirKeeper struct{ dir string }

var _ Keeper = (*DirKeeper)(nil)

// NewDirKeeper keeps versions in dir, creating it if needed.
func NewDirKeeper(dir string) (*DirKeeper, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("registry: folder of kept plugin versions: %w", err)
	}
	return &DirKeeper{dir: dir}, nil
}

// Dir is the folder the versions are kept in.
func (k *DirKeeper) Dir() string { return k.dir }

// Path is where the version of name with hash is kept.
func (k *DirKeeper) Path(name, hash string) string {
	return filepath.Join(k.dir, name+"-"+hash+".wasm")
}

var keptFile = regexp.MustCompile(`^(.+)-([0-9a-f]{64})\.wasm$`)

// files lists name's kept files, newest last; all names when name is "".
func (k *DirKeeper) files(name string) (map[string][]string, error) {
	ents, err := os.ReadDir(k.dir)
	if err != nil {
		return nil, fmt.Errorf("registry: kept plugin versions: %w", err)
	}
	out := map[string][]string{}
	for _, de := range ents {
		m := keptFile.FindStringSubmatch(de.Name())
		if m == nil || (name != "" && m[1] != name) {
			continue
		}
		out[m[1]] = append(out[m[1]], de.Name())
	}
	return out, nil
}

func (k *DirKeeper) Keep(name, hash string, module []byte) error {
	path := k.Path(name, hash)
	if fi, err := os.Stat(path); err == nil && fi.Size() == int64(len(module)) {
		// Kept already (every start loads the same files again); Kept checks the bytes.
		return nil
	}
	if err := writeSynced(path, module); err != nil {
		return fmt.Errorf("registry: keeping %s: %w", path, err)
	}
	old, err := k.files(name)
	if err != nil {
		return err
	}
	for _, f := range old[name] {
		if f != filepath.Base(path) {
			os.Remove(filepath.Join(k.dir, f))
		}
	}
	return nil
}

func (k *DirKeeper) Kept(name string) ([]byte, string, bool, error) {
	files, err := k.files(name)
	if err != nil {
		return nil, "", false, err
	}
	// After a crash between a write and the removal of the old file, two may be left: any
	// whose bytes match its name is a validated version; take the newest.
	var newest []byte
	var hash string
	var newestMod int64
	var bad []string
	for _, f := range files[name] {
		path := filepath.Join(k.dir, f)
		b, err := os.ReadFile(path)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		h := keptFile.FindStringSubmatch(f)[2]
		if host.Hash(b) != h {
			bad = append(bad, f+": its bytes do not match the hash in its name")
			continue
		}
		fi, err := os.Stat(path)
		if err != nil {
			continue
		}
		if newest == nil || fi.ModTime().UnixNano() > newestMod {
			newest, hash, newestMod = b, h, fi.ModTime().UnixNano()
		}
	}
	if newest == nil && len(bad) > 0 {
		return nil, "", false, fmt.Errorf("registry: kept versions of %q unreadable: %s", name, strings.Join(bad, "; "))
	}
	return newest, hash, newest != nil, nil
}

func (k *DirKeeper) Forget(name string) error {
	files, err := k.files(name)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files[name] {
		if err := os.Remove(filepath.Join(k.dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (k *DirKeeper) Names() ([]string, error) {
	files, err := k.files("")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// writeSynced writes b to path through a synced temporary file and a rename, then syncs the
// folder, so the file is whole and on disk when it returns.
func writeSynced(path string, b []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
