// clock reports what a guest sees of time: the wall clock's year, and how much monotonic time a
// one-hour time.Sleep took, as "year elapsed-ns". The host's virtual clock makes the sleep return
// at once while time moves forward by the hour.
package main

import (
	"strconv"
	"time"
	"unsafe"
)

//go:wasmimport allocd:host/v1 output_write
func outputWrite(ptr unsafe.Pointer, n uint32)

//go:wasmexport allocd_abi_version
func abiVersion() int32 { return 1 << 16 }

//go:wasmexport allocate
func allocate() int32 {
	start := time.Now()
	time.Sleep(time.Hour)
	b := strconv.AppendInt(nil, int64(start.UTC().Year()), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(time.Since(start)), 10)
	outputWrite(unsafe.Pointer(&b[0]), uint32(len(b)))
	return 0
}

func main() {}
