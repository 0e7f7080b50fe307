// noexport exports allocd_abi_version but not allocate.
package main

//go:wasmexport allocd_abi_version
func abiVersion() int32 { return 1 << 16 }

func main() {}
