// plainpdk is written with plain go-pdk: it reads the request with pdk.Input, decodes it with
// the abi codec and answers with pdk.Output, on Extism's byte-wise path. It gives consumer i the
// queues i, i+c, i+2c, ...; an unknown config key "fail" makes it fail the whole call.
package main

import (
	"github.com/allocd/allocd/abi"
	"github.com/extism/go-pdk"
)

//go:wasmexport allocd_abi_version
func abiVersion() int32 { return 1 << 16 }

//go:wasmexport allocate
func allocate() int32 {
	if v, ok := pdk.GetConfig("fail"); ok {
		pdk.SetErrorString("asked to fail: " + v)
		return 1
	}
	v, err := abi.ParseRequest(pdk.Input())
	if err != nil {
		pdk.SetError(err)
		return 1
	}
	pdk.Log(pdk.LogInfo, "plainpdk allocating for "+v.Group())
	var w abi.ResponseWriter
	w.Reset(nil)
	n, c := v.NumQueues(), v.NumConsumers()
	for t := 0; t < v.NumTargets(); t++ {
		self := v.TargetIndex(t)
		w.Begin()
		for i := self; self >= 0 && i < n; i += c {
			w.Append(i)
		}
	}
	pdk.Output(w.Bytes())
	return 0
}

func main() {}
