package server

import (
	"net/url"
	"testing"
)

func FuzzHistoryQuery(f *testing.F) {
	for _, s := range []string{
		"topic=T", "topic=T&limit=50&before=12", "topic=T&limit=0", "topic=T&limit=1001", "topic=&limit=1",
		"topic=T&before=-3", "topic=T&before=x", "limit=5", "topic=a%20b",
		"topic=T&brokerName=broker-a&queueId=3", "topic=T&brokerName=b&queueId=-1", "topic=T&queueId=1",
		"topic=T&brokerName=b&queueId=99999999999", "%zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		if h, err := parseHistory(q); err != nil {
			checkClean(t, err)
		} else if h.topic == "" || h.limit < 0 || h.limit > 1000 || h.before < 0 {
			t.Fatalf("%q parsed to %+v", raw, h)
		}
		if h, err := parseExplain(q); err != nil {
			checkClean(t, err)
		} else if h.topic == "" || h.brokerName == "" || h.queueID < 0 {
			t.Fatalf("%q parsed to %+v", raw, h)
		}
	})
}
