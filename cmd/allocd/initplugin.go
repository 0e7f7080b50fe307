package main

import (
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/allocd/allocd"
)

func init() {
	register(command{"init-plugin", "write a new plugin module (Go) that builds and passes allocd check as written", runInitPlugin})
}

//go:embed scaffold/*.tmpl
var scaffold embed.FS

// pluginNameRE is what a plugin name may be: it becomes NAME.wasm in a plugin folder.
var pluginNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// sdkDir is the folder of the scaffold that holds the copy of the SDK.
const sdkDir = "allocd-sdk"

func runInitPlugin(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("init-plugin", flag.ContinueOnError)
	fl.SetOutput(stderr)
	name := fl.String("name", "", "plugin name, NAME.wasm once built (default: the folder's name)")
	module := fl.String("module", "", "Go module path of the plugin (default: the plugin name)")
	sdk := fl.String("sdk", "", "point the replace line at this allocd checkout instead of writing a copy of the SDK")
	fl.Usage = func() {
		fmt.Fprintln(stderr, `usage: allocd init-plugin DIR [--name NAME] [--module PATH] [--sdk CHECKOUT]

Writes a Go plugin module into DIR (created; it must be empty): go.mod, main.go (a weighted
strategy that reads consumer labels and the binding's config), main_test.go, a Makefile (make,
make test, make check) and README.md, and allocd-sdk/, a copy of the SDK from this binary,
which go.mod's replace line points at while the SDK is not on a public module proxy.`)
		fl.PrintDefaults()
	}
	positional, err := parseInterspersed(fl, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		return usageErr("name the folder to write: allocd init-plugin DIR [--name NAME]")
	}
	dir := positional[0]
	if *name == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		*name = strings.ToLower(filepath.Base(abs))
	}
	if !pluginNameRE.MatchString(*name) {
		return usageErr("plugin name %q: use 1 to 63 of a-z, 0-9, '-' and '_', starting with a letter or digit (--name)", *name)
	}
	if *module == "" {
		*module = *name
	}
	replace := "./" + sdkDir
	if *sdk != "" {
		abs, err := filepath.Abs(*sdk)
		if err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(abs, "abi", "plugin", "plugin.go")); err != nil {
			return usageErr("--sdk %s is not an allocd checkout (no abi/plugin/plugin.go)", *sdk)
		}
		replace = abs
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("%s is not empty: init-plugin writes only into a new or empty folder", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}

	files := map[string][]byte{}
	fill := strings.NewReplacer("__NAME__", *name, "__MODULE__", *module, "__REPLACE__", replace)
	tmpls, err := fs.Glob(scaffold, "scaffold/*.tmpl")
	if err != nil {
		return err
	}
	for _, t := range tmpls {
		src, err := scaffold.ReadFile(t)
		if err != nil {
			return err
		}
		files[strings.TrimSuffix(path.Base(t), ".tmpl")] = []byte(fill.Replace(string(src)))
	}
	files[".gitignore"] = []byte("*.wasm\n")
	if *sdk == "" {
		if err := sdkFiles(files); err != nil {
			return err
		}
	}
	for rel, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "wrote plugin %q in %s\nnext: cd %s && make test && make && allocd check ./%s.wasm\n", *name, dir, dir, *name)
	return nil
}

// sdkFiles adds the SDK's copy: a go.mod naming it github.com/allocd/allocd, and the non-test
// sources of abi and abi/plugin as this binary embeds them.
func sdkFiles(files map[string][]byte) error {
	files[sdkDir+"/go.mod"] = []byte("// A copy of the allocd SDK written by `allocd init-plugin`; see ../go.mod.\nmodule github.com/allocd/allocd\n\ngo 1.26.0\n")
	return fs.WalkDir(allocd.SDK, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := allocd.SDK.ReadFile(p)
		if err != nil {
			return err
		}
		files[sdkDir+"/"+p] = b
		return nil
	})
}

// parseInterspersed parses flags that may come before, between or after the positional
// arguments, and returns those.
func parseInterspersed(fl *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for rest := args; ; {
		if err := fl.Parse(rest); err != nil {
			return nil, err
		}
		if fl.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fl.Arg(0))
		rest = fl.Args()[1:]
	}
}
