package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/rs/zerolog"

	"github.com/allocd/allocd/registry"

	"github.com/allocd/allocd/internal/builtin"
)

// defaultDataDir is where the daemon keeps its state unless --data-dir says otherwise, chosen so
// that it does not depend on the folder allocd starts in (RATIONALE.md, "Where the state
// lives"): systemd's $STATE_DIRECTORY when a unit sets StateDirectory=, otherwise the user's data
// folder: $XDG_DATA_HOME/allocd, ~/.local/share/allocd, on macOS ~/Library/Application
// Support/allocd, on Windows %AppData%\allocd.
func defaultDataDir() (string, error) {
	if d, _, _ := strings.Cut(os.Getenv("STATE_DIRECTORY"), ":"); d != "" {
		return d, nil
	}
	switch runtime.GOOS {
	case "darwin", "windows", "ios", "plan9":
		dir, err := os.UserConfigDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(dir, "allocd"), nil
	}
	if d := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "allocd"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no user data folder: %w", err)
	}
	return filepath.Join(home, ".local", "share", "allocd"), nil
}

// pluginsDirIn is the default plugin folder of a data folder: DATA-DIR/plugins.
func pluginsDirIn(dataDir string) string { return filepath.Join(dataDir, "plugins") }

// defaultPluginsDir is the plugin folder of the default data folder, where `allocd check NAME` and
// `allocd allocate --plugin NAME` look first, as `allocd serve` with no flags does ("" when there
// is no default data folder).
func defaultPluginsDir() string {
	d, err := defaultDataDir()
	if err != nil {
		return ""
	}
	return pluginsDirIn(d)
}

// defaultCacheDir keeps compiled plugins across runs: a cache hit loads in ~80 ms where a
// compile takes 1-2.5 s.
func defaultCacheDir() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "allocd", "wazero")
	}
	return ""
}

// readPlugin turns NAME or PATH.wasm into a name and the module's bytes: PATH.wasm is read as it
// is; NAME is dir/NAME.wasm when that file exists (the folder overrides built-ins, as in the
// daemon), else the built-in plugin NAME.
func readPlugin(arg, dir string) (name string, wasm []byte, err error) {
	if arg == "" {
		return "", nil, usageErr("--plugin is required (a plugin name, or a path to a .wasm file)")
	}
	if strings.HasSuffix(arg, ".wasm") || strings.ContainsRune(arg, os.PathSeparator) || strings.ContainsRune(arg, '/') {
		wasm, err := os.ReadFile(arg)
		return strings.TrimSuffix(filepath.Base(arg), ".wasm"), wasm, err
	}
	if dir != "" {
		path := filepath.Join(dir, arg+".wasm")
		wasm, err := os.ReadFile(path)
		if err == nil {
			return arg, wasm, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", nil, err
		}
	}
	if wasm, ok := builtin.Bytes(arg); ok {
		return arg, wasm, nil
	}
	where := "no built-in plugin of that name"
	if dir != "" {
		where = fmt.Sprintf("no file %s and no built-in plugin of that name", filepath.Join(dir, arg+".wasm"))
	}
	return "", nil, fmt.Errorf("plugin %q: %s (built-in: %s)", arg, where, builtinList())
}

// builtinList names the built-in plugins for messages.
func builtinList() string {
	names := builtin.Names()
	if len(names) == 0 {
		return "none: this allocd was built without them; build it with `make`"
	}
	return strings.Join(names, ", ")
}

// configFlag collects repeated --config key=value flags.
type configFlag map[string]string

func (c configFlag) String() string { return fmt.Sprint(map[string]string(c)) }

func (c configFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("config %q is not key=value", s)
	}
	c[k] = v
	return nil
}

func newLogger(w interface{ Write([]byte) (int, error) }, level string, json bool) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Nop(), usageErr("log level %q: want trace, debug, info, warn, error or disabled", level)
	}
	if json {
		return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: w, NoColor: true}).Level(lvl).With().Timestamp().Logger(), nil
}

// defaultDirs fills in the folders the serve flags left to their defaults: --data-dir must
// resolve (noDefault says why the default data folder could not), and --plugins-dir defaults to
// DATA-DIR/plugins, created so that it can be watched and a plugin dropped in.
func (f *serveFlags) defaultDirs(noDefault error) error {
	if f.dataDir == "" {
		if noDefault != nil {
			return usageErr("--data-dir is required: there is no default data folder (%v)", noDefault)
		}
		return usageErr("--data-dir is required")
	}
	if f.pluginsDir == "" {
		f.pluginsDir = pluginsDirIn(f.dataDir)
		if err := os.MkdirAll(f.pluginsDir, 0o755); err != nil {
			return fmt.Errorf("--plugins-dir (default %s): %w", f.pluginsDir, err)
		}
	}
	return nil
}

// logBuiltins says at start which plugins are built in and which the folder overrides, and warns
// when the binary has none (built with go build rather than make).
func logBuiltins(log zerolog.Logger, reg *registry.Registry) {
	names := builtin.Names()
	if len(names) == 0 {
		log.Warn().Msg("this allocd has no built-in plugins (built with `go build`, not `make`): only the plugin folder's serve")
		return
	}
	var overridden []string
	for _, n := range names {
		if s, ok := reg.StatusOf(n); ok && s.ActiveHash != "" && !s.Builtin {
			overridden = append(overridden, n)
		}
	}
	log.Info().Strs("builtin", names).Strs("overriddenByFolder", overridden).Str("pluginsDir", reg.Dir()).Msg("built-in plugins")
}
