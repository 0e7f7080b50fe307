package server

import (
	"bytes"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// checkClean fails when a decoding error leaks Go internals instead of naming the problem.
func checkClean(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if msg == "" {
		t.Fatal("empty error message")
	}
	for _, leak := range []string{"json: ", "reflect", "coordinator.", "main.", "server."} {
		if strings.Contains(msg, leak) {
			t.Fatalf("error %q leaks %q", msg, leak)
		}
	}
	if statusOf(err) != 400 && statusOf(err) != 413 {
		t.Fatalf("decoding error %q maps to status %d, want 400 or 413", msg, statusOf(err))
	}
}

func FuzzHeartbeatRequest(f *testing.F) {
	for _, s := range []string{
		`{"cid":"10.0.0.7@1234","topics":["T"],"instanceId":"","labels":{},"generations":{"T":2}}`,
		`{"cid":"c","labels":{"weight":"3","zone":"a"},"instanceId":"pod-1"}`,
		`{"cid":"c","generations":{"T":-1}}`,
		`{"cid":"c","generations":{"T":1e3}}`,
		`{"cid":"\u0000"}`,
		`{"cid":"c"} {}`,
		`{"cid":1}`,
		`null`,
		``,
		`{"cid":"c","topics":["a b"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		hb, err := decodeHeartbeat(bytes.NewReader(data))
		if err != nil {
			checkClean(t, err)
			return
		}
		if err := hb.Check(); err != nil {
			t.Fatalf("accepted a heartbeat that fails Check: %v", err)
		}
		if !utf8.ValidString(hb.CID) || hb.CID == "" {
			t.Fatalf("accepted client id %q", hb.CID)
		}
	})
}

func FuzzTopicRequest(f *testing.F) {
	for _, s := range []string{
		`{"brokers":[{"name":"broker-a","readQueues":8,"writeQueues":8}]}`,
		`{"brokers":[{"name":"a","readQueues":"8"}]}`,
		`{"brokers":[{"name":"a","readQueues":99999999999999999999}]}`,
		`{"brokers":null}`,
		`{"brokers":[{"name":"a","extra":1}]}`,
		`[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := decodeTopic(bytes.NewReader(data)); err != nil {
			checkClean(t, err)
		}
	})
}

func FuzzBindingRequest(f *testing.F) {
	for _, s := range []string{
		`{"strategy":"averagely","config":{},"model":"clustering","delivery":"queue"}`,
		`{"strategy":"hash","config":{"vnodes":"10"}}`,
		`{"strategy":"hash","config":{"vnodes":10}}`,
		`{"orderly":"yes"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := decodeBinding(bytes.NewReader(data)); err != nil {
			checkClean(t, err)
		}
	})
}

func FuzzPollQuery(f *testing.F) {
	for _, s := range []string{
		"cid=c&topic=T&after=2&wait=30s",
		"cid=c&after=-1",
		"cid=c&wait=99999999999999999999",
		"cid=c&wait=-5s",
		"cid=c&topic=&topic=T",
		"cid=%00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		p, err := parsePoll(q, 30*time.Second, time.Minute)
		if err != nil {
			checkClean(t, err)
			return
		}
		if p.wait < 0 || p.wait > time.Minute || p.after < -1 || p.cid == "" {
			t.Fatalf("parsePoll(%q) = %+v", raw, p)
		}
	})
}

func FuzzPollBatchRequest(f *testing.F) {
	for _, s := range []string{
		`{"polls":[{"group":"g","cid":"c","topics":["T"],"after":2,"wait":"30s"}]}`,
		`{"polls":[{"group":"g","cid":"c"},{"group":"h","cid":"d","after":0}]}`,
		`{"polls":[{"group":"g","cid":"c","after":-1}]}`,
		`{"polls":[{"group":"g","cid":"c","wait":"99999999999999999999"}]}`,
		`{"polls":[{"group":"a b","cid":"c","topics":[""]}]}`,
		`{"polls":[{"group":"g","cid":"c","after":1e30}]}`,
		`{"polls":[{"group":"g","cid":"c","extra":1}]}`,
		`{"polls":null}`,
		`{"polls":[]}`,
		`[`,
	} {
		f.Add([]byte(s))
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		polls, err := decodePollBatch(data, start, 30*time.Second, time.Minute)
		if err != nil {
			checkClean(t, err)
			return
		}
		if len(polls) > MaxPollBatch {
			t.Fatalf("accepted %d polls", len(polls))
		}
		for _, p := range polls {
			if p.err != nil {
				checkClean(t, p.err)
				continue
			}
			if p.q.wait < 0 || p.q.wait > time.Minute || p.q.after < -1 || p.q.cid == "" || p.group == "" || !p.deadline.Equal(start.Add(p.q.wait)) {
				t.Fatalf("accepted poll %+v", p)
			}
		}
	})
}
