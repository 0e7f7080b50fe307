//go:build wasip1

// readstatic reads the input into a buffer it keeps between calls.
package main

import "github.com/allocd/allocd/bench/guest/probe"

//go:wasmexport allocate
func allocate() int32 { probe.ReadStatic(); probe.Respond(); return 0 }

func main() {}
