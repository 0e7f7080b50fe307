//go:build wasip1

// respond writes the whole group's answer for 1024 queues and 64 consumers (16 indices each)
// through abi.ResponseWriter, as the SDK does, without reading the request.
package main

import "github.com/allocd/allocd/bench/guest/probe"

var dst []int

//go:wasmexport allocate
func allocate() int32 {
	w := probe.Writer()
	for c := range 64 {
		dst = dst[:0]
		for i := range 16 {
			dst = append(dst, c*16+i)
		}
		w.Indices(dst)
	}
	probe.Respond()
	return 0
}

func main() {}
