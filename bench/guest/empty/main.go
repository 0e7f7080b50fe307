//go:build wasip1

// empty writes an empty response and reads nothing: the floor of a call.
package main

import "github.com/allocd/allocd/bench/guest/probe"

//go:wasmexport allocate
func allocate() int32 { probe.Respond(); return 0 }

func main() {}
