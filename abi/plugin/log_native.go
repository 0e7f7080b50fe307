//go:build !wasip1

package plugin

import (
	"fmt"
	"os"
)

// Log writes to standard error when a plugin runs natively (its own tests and benchmarks); in
// WebAssembly it goes to the host's log.
func Log(level LogLevel, msg string) {
	fmt.Fprintf(os.Stderr, "plugin %s: %s\n", level, msg)
}
