package server

import (
	"bytes"
	"io"
	"testing"

	"github.com/allocd/allocd/coordinator"
)

// FuzzLockRequests feeds the same bytes to every lock route's decoder: each either refuses
// them with a clean 400 (or 413), or returns a call whose names pass the daemon's checks.
func FuzzLockRequests(f *testing.F) {
	for _, s := range []string{
		`{"cid":"c1","queues":[{"topic":"T","brokerName":"b","queueId":0}],"lease":"60s"}`,
		`{"cid":"c1","queues":[{"topic":"T","brokerName":"b","queueId":-1}]}`,
		`{"cid":"c1","queues":[{"topic":"T","brokerName":"","queueId":3000000000}]}`,
		`{"cid":"c1","topic":"T","messageGroup":"order-42","lease":"1h"}`,
		`{"cid":"c1","topic":"T","messageGroup":"order-42","token":9,"outcome":"done"}`,
		`{"cid":"c1","topic":"T","messageGroup":"\u0000","token":9,"outcome":"retry"}`,
		`{"topic":"T","queue":{"topic":"T","brokerName":"b","queueId":0},"token":9}`,
		`{"topic":"T","messageGroup":"g","token":-1}`,
		`{"lease":"-5s"}`,
		`{"lease":5}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	decoders := map[string]func(io.Reader) (lockCall, error){
		"lock queues": decodeLockQueues, "unlock queues": decodeUnlockQueues,
		"lock message group": decodeLockMessageGroup, "release": decodeRelease, "check": decodeCheck,
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, dec := range decoders {
			c, err := dec(bytes.NewReader(data))
			if err != nil {
				checkClean(t, err)
				continue
			}
			if name != "check" && coordinator.CheckID("cid", c.cid) != nil {
				t.Fatalf("%s accepted cid %q", name, c.cid)
			}
			for _, q := range c.queues {
				if q.QueueID < 0 || coordinator.CheckName("topic", q.Topic) != nil {
					t.Fatalf("%s accepted queue %+v", name, q)
				}
			}
			if c.lease < 0 {
				t.Fatalf("%s accepted lease %v", name, c.lease)
			}
		}
	})
}
