package host

import (
	"runtime"
	"time"

	"github.com/rs/zerolog"
)

// Defaults of Config. They fit a Go guest: it needs about 52 pages (3.25 MiB) of memory at start
// and settled at 128 pages (8 MiB) in long runs.
const (
	DefaultTimeout          = 2 * time.Second
	DefaultMemoryLimitPages = 1024 // 64 MiB
	DefaultMaxOutput        = 16 << 20
	DefaultMaxArena         = 16 << 20
	// DefaultRecycleAfter retires an instance after this many calls, bounding what a slow leak
	// in a guest can accumulate.
	DefaultRecycleAfter = 100_000
	// DefaultMaxModuleBytes caps a module's size: 16 MiB, five times the largest real plugin
	// (a standard-Go guest with the SDK is 2-3 MB; TinyGo, Rust and AssemblyScript ones are
	// far smaller), while reading, rewriting and compiling that much stays well under a second
	// of work and a few hundred MB of memory.
	DefaultMaxModuleBytes = 16 << 20
)

// Config sets up a Runtime. The zero value of every field means its default.
type Config struct {
	// CacheDir keeps compiled code across restarts; "" keeps it in memory only.
	CacheDir string
	// Timeout bounds every call into a plugin (DefaultTimeout).
	Timeout time.Duration
	// MemoryLimitPages caps each instance's linear memory in 64 KiB pages (DefaultMemoryLimitPages).
	MemoryLimitPages uint32
	// MaxOutput caps the bytes a plugin may return from one call (DefaultMaxOutput).
	MaxOutput int
	// MaxArena caps the Extism host memory a plugin may allocate in one call (DefaultMaxArena).
	MaxArena int
	// MaxInstances caps the instances of one plugin, hence its concurrent calls
	// (runtime.GOMAXPROCS(0)).
	MaxInstances int
	// RecycleAfter retires an instance after this many calls (DefaultRecycleAfter).
	RecycleAfter int
	// MaxModuleBytes caps the size of a module Load accepts (DefaultMaxModuleBytes).
	MaxModuleBytes int
	// CompileWorkers is the number of goroutines that compile one module (2; compiling a 3 MB
	// Go guest takes 2.4 s with one and 1.2-1.4 s with two on a 2-core machine).
	CompileWorkers int
	// Logger receives plugin logs and host events; each line carries the plugin's name.
	Logger zerolog.Logger
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MemoryLimitPages == 0 {
		c.MemoryLimitPages = DefaultMemoryLimitPages
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = DefaultMaxOutput
	}
	if c.MaxArena <= 0 {
		c.MaxArena = DefaultMaxArena
	}
	if c.MaxInstances <= 0 {
		c.MaxInstances = runtime.GOMAXPROCS(0)
	}
	if c.RecycleAfter <= 0 {
		c.RecycleAfter = DefaultRecycleAfter
	}
	if c.MaxModuleBytes <= 0 {
		c.MaxModuleBytes = DefaultMaxModuleBytes
	}
	if c.CompileWorkers <= 0 {
		c.CompileWorkers = 2
	}
	return c
}
