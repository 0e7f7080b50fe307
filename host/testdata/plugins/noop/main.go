// noop does nothing: it measures the cost of a call through the host.
package main

//go:wasmexport allocd_abi_version
func abiVersion() int32 { return 1 << 16 }

//go:wasmexport allocate
func allocate() int32 { return 0 }

func main() {}
