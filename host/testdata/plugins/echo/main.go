// echo returns its input: with the "bulk" config it uses allocd's one-call transfer, otherwise
// go-pdk's byte-wise Input and Output. It measures the two paths.
package main

import (
	"unsafe"

	"github.com/extism/go-pdk"
)

//go:wasmimport allocd:host/v1 input_read
func inputRead(ptr unsafe.Pointer, limit uint32) uint32

//go:wasmimport allocd:host/v1 output_write
func outputWrite(ptr unsafe.Pointer, n uint32)

//go:wasmexport allocd_abi_version
func abiVersion() int32 { return 1 << 16 }

//go:wasmexport allocate
func allocate() int32 {
	pdk.Output(pdk.Input())
	return 0
}

var buf = make([]byte, 128<<10)

//go:wasmexport echo_bulk
func echoBulk() int32 {
	n := inputRead(unsafe.Pointer(&buf[0]), uint32(len(buf)))
	outputWrite(unsafe.Pointer(&buf[0]), n)
	return 0
}

func main() {}
