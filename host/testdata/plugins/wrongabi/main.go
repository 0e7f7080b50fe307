// wrongabi claims ABI 2.0.
package main

//go:wasmexport allocd_abi_version
func abiVersion() int32 { return 2 << 16 }

//go:wasmexport allocate
func allocate() int32 { return 0 }

func main() {}
