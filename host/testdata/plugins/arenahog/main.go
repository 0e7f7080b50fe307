// arenahog asks the host for 64 MiB of Extism memory, past the host's arena limit.
package main

import "github.com/extism/go-pdk"

//go:wasmexport allocd_abi_version
func abiVersion() int32 { return 1 << 16 }

//go:wasmexport allocate
func allocate() int32 {
	mem := pdk.Allocate(64 << 20)
	pdk.OutputMemory(mem)
	return 0
}

func main() {}
