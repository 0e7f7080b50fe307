package main

import (
	"encoding/json"
	"testing"

	"github.com/allocd/allocd/abi"
)

// FuzzAllocateLine: any request line either fails with an error or builds a request whose
// optional parts are parallel to its lists and which the codec encodes; nothing panics.
func FuzzAllocateLine(f *testing.F) {
	for _, s := range []string{
		`{"group":"g","cid":"c1","mqAll":[{"topic":"T","brokerName":"b","queueId":0}],"cidAll":["c1"]}`,
		`{"mqAll":[{"topic":"T","brokerName":"b","queueId":0}],"cidAll":["c1"],"queueLabels":[{"zone":"z"}],"consumerLabels":[null],"prevOwners":[0]}`,
		`{"mqAll":[],"cidAll":["c1"],"config":{"consumeridcs":["IDC1"],"vnodes":null,"inner":"hash"}}`,
		`{"mqAll":[{"topic":"T","brokerName":"b","queueId":0}],"cidAll":[],"prevOwners":[3],"config":[0]}`,
		`{"consumerLabels":[{"queues":[{"topic":"T","brokerName":"b","queueId":1}]}],"cidAll":["a"],"config":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var l allocateLine
		if json.Unmarshal(line, &l) != nil {
			return
		}
		req, err := l.request(map[string]string{"vnodes": "3"})
		if err != nil {
			return
		}
		if (req.QueueAttrs != nil && len(req.QueueAttrs) != len(req.Queues)) ||
			(req.ConsumerAttrs != nil && len(req.ConsumerAttrs) != len(req.Consumers)) ||
			(req.PrevOwners != nil && len(req.PrevOwners) != len(req.Queues)) {
			t.Fatalf("request not parallel to its lists: %+v", req)
		}
		if _, err := abi.EncodeRequest(nil, req); err != nil {
			t.Fatalf("a built request does not encode: %v", err)
		}
	})
}
