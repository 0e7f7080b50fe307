package server

import (
	"bytes"
	"testing"

	"github.com/allocd/allocd/coordinator"
)

func FuzzOffsetsRequest(f *testing.F) {
	for _, s := range []string{
		`{"group":"g","offsets":[{"brokerName":"broker-a","queueId":3,"committed":120,"max":120,"lastWrite":"2026-01-01T00:00:00Z"}]}`,
		`{"offsets":[{"brokerName":"broker-a","queueId":3,"max":120}]}`,
		`{"offsets":[{"brokerName":"a","queueId":1,"lastWrite":"yesterday"}]}`,
		`{"offsets":[{"brokerName":"a","queueId":1,"lastWrite":3}]}`,
		`{"offsets":[{"brokerName":"a","queue":1}]}`,
		`{"offsets":[1]}`,
		`{"group":"a b"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeOffsets(bytes.NewReader(data))
		if err != nil {
			checkClean(t, err)
			return
		}
		if req.Group != "" {
			if err := coordinator.CheckName("group", req.Group); err != nil {
				t.Fatalf("accepted group %q: %v", req.Group, err)
			}
		}
	})
}

func FuzzAutoscalePolicy(f *testing.F) {
	for _, s := range []string{
		`{"brokers":[],"autoscale":{"enabled":true,"min":1,"max":64,"expandWriteDelay":"10s","maxConfirmWait":"60s","shrinkReadDelay":"5m","shrinkStableFor":"60s"}}`,
		`{"autoscale":{"shrinkReadDlay":"5m"}}`,
		`{"autoscale":{"min":"1"}}`,
		`{"autoscale":{"expandWriteDelay":"-1s"}}`,
		`{"autoscale":[]}`,
		`{"autoscale":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeTopic(bytes.NewReader(data))
		if err != nil {
			checkClean(t, err)
			return
		}
		p, err := coordinator.ParsePolicy(req.Autoscale)
		if err != nil {
			checkClean(t, err)
			return
		}
		if p != nil {
			if err := p.Validate(); err != nil || p.Max > coordinator.MaxQueues {
				t.Fatalf("accepted policy %+v: %v", p, err)
			}
		}
	})
}
