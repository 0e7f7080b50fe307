//go:build wasip1

// sdk is the Go SDK with a strategy that gives nobody anything: what the SDK itself costs in a
// whole-group call (reading, parsing, the string table's copy, the loop over every target, an
// empty result for each).
package main

import "github.com/allocd/allocd/abi/plugin"

func init() {
	plugin.Register(plugin.Info{Name: "sdk", Version: "1.0.0"}, func(_ *plugin.Args, dst []int) ([]int, error) {
		return dst, nil
	})
}

func main() {}
