//go:build wasip1

// Package probe is what the probe plugins share: the ABI version export and the bulk transfer
// imports, used the way abi/plugin uses them.
package probe

import (
	"unsafe"

	"github.com/allocd/allocd/abi"
)

//go:wasmimport allocd:host/v1 input_read
func inputRead(ptr unsafe.Pointer, limit uint32) uint32

//go:wasmimport allocd:host/v1 output_write
func outputWrite(ptr unsafe.Pointer, n uint32)

//go:wasmexport allocd_abi_version
func abiVersion() int32 { return abi.Version(abi.Major, abi.Minor) }

var (
	out      abi.ResponseWriter
	static   = make([]byte, 64<<10)
	sizeHint = 4096
)

// ReadStatic reads the input into a buffer kept between calls.
func ReadStatic() []byte {
	n := inputRead(unsafe.Pointer(&static[0]), uint32(len(static)))
	return static[:n]
}

// ReadAlloc reads the input into a fresh buffer, as abi/plugin does.
func ReadAlloc() []byte {
	buf := make([]byte, sizeHint)
	n := inputRead(unsafe.Pointer(unsafe.SliceData(buf)), uint32(len(buf)))
	if int(n) > len(buf) {
		buf = make([]byte, n)
		inputRead(unsafe.Pointer(unsafe.SliceData(buf)), n)
		sizeHint = int(n)
	}
	return buf[:n]
}

// Writer is the response being built; Respond sends it.
func Writer() *abi.ResponseWriter { return &out }

// Respond sends the response built so far and starts a new one.
func Respond() {
	b := out.Bytes()
	outputWrite(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)))
	out.Reset(b[:0])
}
