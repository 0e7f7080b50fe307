//go:build wasip1

// parse reads the input into a kept buffer and parses it into a kept View, as the SDK does.
package main

import (
	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/bench/guest/probe"
)

var v abi.View

//go:wasmexport allocate
func allocate() int32 {
	if err := v.Parse(probe.ReadStatic()); err != nil {
		panic(err)
	}
	probe.Respond()
	return 0
}

func main() {}
