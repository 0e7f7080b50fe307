//go:build wasip1

// readalloc reads the input into a fresh buffer, as the SDK did on every call before it kept one.
package main

import "github.com/allocd/allocd/bench/guest/probe"

//go:wasmexport allocate
func allocate() int32 { probe.ReadAlloc(); probe.Respond(); return 0 }

func main() {}
