// Package builtin holds the built-in strategy plugins that the allocd binary embeds, so that
// `allocd serve`, `allocd check NAME` and `allocd allocate --plugin NAME` work from any folder
// with no plugin folder at all.
//
// `make` builds every plugins/NAME to build/plugins/NAME.wasm and copies those files into
// wasm/ here before it builds the binary. The .wasm files are not committed: a fresh clone has
// only wasm/README.md, so that the embed pattern matches and the module builds, vets and tests
// before any plugin is built; such a binary has no built-ins (Names is empty), and the daemon
// says so at start.
package builtin

import (
	"embed"
	"io/fs"
	"path"
	"slices"
	"strings"
)

//go:embed wasm
var files embed.FS

// FS is the folder of the built-in plugins: NAME.wasm for each (and a README.md).
func FS() fs.FS {
	sub, err := fs.Sub(files, "wasm")
	if err != nil {
		panic(err) // "wasm" is a valid path: cannot happen
	}
	return sub
}

// Names lists the built-in plugins, sorted.
func Names() []string {
	ents, _ := files.ReadDir("wasm")
	var names []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".wasm"); ok && !e.IsDir() && name != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Bytes returns the module of built-in plugin name.
func Bytes(name string) ([]byte, bool) {
	if name == "" || strings.ContainsAny(name, `/\`) {
		return nil, false
	}
	b, err := files.ReadFile(path.Join("wasm", name+".wasm"))
	return b, err == nil
}
