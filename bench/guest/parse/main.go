//go:build wasip1

// parse reads the input into a kept buffer and runs abi.ParseRequest on it.
package main

import (
	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/bench/guest/probe"
)

//go:wasmexport allocate
func allocate() int32 {
	if _, err := abi.ParseRequest(probe.ReadStatic()); err != nil {
		panic(err)
	}
	probe.Respond()
	return 0
}

func main() {}
