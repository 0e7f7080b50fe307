// random answers 16 bytes of the host's WASI random source from allocate, and nothing from its
// quiet export, which reads no randomness. It checks that every call sees the same bytes.
package main

import (
	"crypto/rand"
	"unsafe"
)

//go:wasmimport allocd:host/v1 output_write
func outputWrite(ptr unsafe.Pointer, n uint32)

//go:wasmexport allocd_abi_version
func abiVersion() int32 { return 1 << 16 }

//go:wasmexport allocate
func allocate() int32 {
	var b [16]byte
	rand.Read(b[:])
	outputWrite(unsafe.Pointer(&b[0]), uint32(len(b)))
	return 0
}

//go:wasmexport quiet
func quiet() int32 { return 0 }

func main() {}
