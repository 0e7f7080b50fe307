package abi_test

import (
	"fmt"

	"github.com/allocd/allocd/abi"
)

// The host's side of a call: sort the request canonically, encode it, and judge the plugin's
// answer. The plugin's side reads the request through a View, without decoding it.
func Example() {
	req := &abi.Request{
		Group:     "g",
		Queues:    []abi.Queue{{Topic: "T", BrokerName: "b", QueueID: 1}, {Topic: "T", BrokerName: "b", QueueID: 0}},
		Consumers: []string{"c2", "c1"},
		Config:    map[string]string{"vnodes": "10"},
	}
	abi.Canonicalize(req)
	in, _ := abi.EncodeRequest(nil, req)

	// In the plugin.
	v, _ := abi.ParseRequest(in)
	vnodes, _ := v.Config("vnodes")
	fmt.Println(v.Group(), v.NumQueues(), v.Queue(0), v.Consumer(0), vnodes)
	var w abi.ResponseWriter
	for t := range v.NumTargets() {
		w.Indices([]int{v.TargetIndex(t)}) // consumer i takes queue i
	}
	out := w.Bytes()

	// Back in the host.
	var resp abi.Response
	if err := abi.DecodeResponse(out, &resp); err != nil {
		panic(err)
	}
	fmt.Println(resp.Results, abi.Validate(req, &resp))
	// Output:
	// g 2 MessageQueue [topic=T, brokerName=b, queueId=0] c1 10
	// [{[0]  false} {[1]  false}] <nil>
}
