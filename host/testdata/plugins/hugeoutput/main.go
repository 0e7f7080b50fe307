// hugeoutput answers with 4 MiB of output, through allocd's bulk output_write.
package main

import "unsafe"

//go:wasmimport allocd:host/v1 output_write
func outputWrite(ptr unsafe.Pointer, n uint32)

//go:wasmexport allocd_abi_version
func abiVersion() int32 { return 1 << 16 }

//go:wasmexport allocate
func allocate() int32 {
	b := make([]byte, 4<<20)
	outputWrite(unsafe.Pointer(&b[0]), uint32(len(b)))
	return 0
}

func main() {}
