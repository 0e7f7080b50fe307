//go:build wasip1

package plugin

import (
	"unsafe"

	"github.com/allocd/allocd/abi"
)

// The bulk-transfer imports of ABI v1 (ABI.md, "allocd:host/v1"): one host call moves the whole
// input or output, where go-pdk's Input and Output take one call per 8 bytes.

//go:wasmimport allocd:host/v1 input_read
func inputRead(ptr unsafe.Pointer, limit uint32) uint32

//go:wasmimport allocd:host/v1 output_write
func outputWrite(ptr unsafe.Pointer, n uint32)

//go:wasmimport allocd:host/v1 error_write
func errorWrite(ptr unsafe.Pointer, n uint32)

//go:wasmimport allocd:host/v1 log_write
func logWrite(level uint32, ptr unsafe.Pointer, n uint32)

// One call at a time runs in an instance, so a call's buffers are kept for the next: a
// whole-group call allocates nothing most of the time (RATIONALE.md).
var (
	in      = make([]byte, 4096)
	state   call
	strings stringChunks
	// storeStrings is strings.store as a func value made once, not at every call.
	storeStrings = strings.store
)

//go:wasmexport allocd_abi_version
func abiVersion() int32 { return abi.Version(abi.Major, abi.Minor) }

//go:wasmexport allocd_describe
func describe() int32 {
	b := info.AppendJSON(nil)
	outputWrite(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)))
	return 0
}

//go:wasmexport allocate
func allocateExport() int32 {
	n := inputRead(unsafe.Pointer(unsafe.SliceData(in)), uint32(len(in)))
	if int(n) > len(in) {
		in = make([]byte, n)
		inputRead(unsafe.Pointer(unsafe.SliceData(in)), n)
	}
	// The input buffer is reused by the next call, so the strings a strategy is given must not
	// alias it: they live in a copy of the request's string table, which is never overwritten,
	// made when the strategy is first given a string.
	var b []byte
	err := state.v.Parse(in[:n])
	if err == nil {
		state.v.DetachStrings(storeStrings)
		b, err = state.run()
	}
	if err != nil {
		msg := err.Error()
		errorWrite(unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
		return 1
	}
	outputWrite(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)))
	return 0
}

// Log sends a message to the host's log at the given level, for example
// plugin.Log(plugin.LogInfo, "ring built"), in one host call (go-pdk's pdk.Log copies the message
// 8 bytes per call). Nothing crosses when the host's level is above level.
func Log(level LogLevel, msg string) {
	if int32(level) < hostLogLevel() {
		return
	}
	logWrite(uint32(level), unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

// go-pdk does not export the level query, so the SDK imports it itself.
//
//go:wasmimport extism:host/env get_log_level
func hostLogLevel() int32
