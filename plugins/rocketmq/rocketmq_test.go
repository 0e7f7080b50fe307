package rocketmq

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const vectorsPath = "../../testdata/rocketmq-java-vectors-small.jsonl"

func TestCheckOrder(t *testing.T) {
	tests := []struct {
		name string
		cid  string
		n, c int
		want string // "" means no error
	}{
		{"all empty: cid wins", "", 0, 0, MsgEmptyCID},
		{"empty cid wins over empty cidAll", "", 3, 0, MsgEmptyCID},
		{"empty cid with full lists", "", 3, 2, MsgEmptyCID},
		{"mqAll wins over cidAll", "a@1", 0, 0, MsgEmptyMQAll},
		{"empty mqAll", "a@1", 0, 2, MsgEmptyMQAll},
		{"negative count is empty", "a@1", -1, 2, MsgEmptyMQAll},
		{"empty cidAll", "a@1", 3, 0, MsgEmptyCIDAll},
		{"whitespace cid is not empty", " ", 1, 1, ""},
		{"ok", "a@1", 1, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.cid, tt.n, tt.c)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check(%q, %d, %d) = %v, want nil", tt.cid, tt.n, tt.c, err)
				}
				return
			}
			var ae *ArgumentError
			if !errors.As(err, &ae) {
				t.Fatalf("Check(%q, %d, %d) = %v (%T), want *ArgumentError", tt.cid, tt.n, tt.c, err, err)
			}
			if err.Error() != tt.want || ae.Msg != tt.want {
				t.Fatalf("Check(%q, %d, %d) = %q, want %q", tt.cid, tt.n, tt.c, err, tt.want)
			}
		})
	}
}

func TestCheckMessagesAreJavas(t *testing.T) {
	for _, m := range []string{MsgEmptyCID, MsgEmptyMQAll, MsgEmptyCIDAll} {
		if got := (&ArgumentError{Msg: m}).Error(); got != m {
			t.Errorf("Error() = %q, want %q", got, m)
		}
	}
	if MsgEmptyCID != "currentCID is empty" || MsgEmptyMQAll != "mqAll is null or mqAll empty" ||
		MsgEmptyCIDAll != "cidAll is null or cidAll empty" {
		t.Fatal("messages drifted from Java's")
	}
}

func TestIndexOf(t *testing.T) {
	ids := []string{"b@1", "a@1", "A@1", "a@1", " "}
	at := func(i int) string { return ids[i] }
	tests := []struct {
		cid  string
		want int
	}{
		{"b@1", 0},
		{"a@1", 1}, // first occurrence of a duplicate
		{"A@1", 2}, // case-sensitive
		{" ", 4},
		{"c@1", -1},
		{"a@1 ", -1}, // exact equality, no trimming
		{"", -1},
	}
	for _, tt := range tests {
		if got := IndexOf(tt.cid, len(ids), at); got != tt.want {
			t.Errorf("IndexOf(%q) = %d, want %d", tt.cid, got, tt.want)
		}
	}
	if got := IndexOf("x", 0, at); got != -1 {
		t.Errorf("IndexOf on no consumers = %d, want -1", got)
	}
}

func TestLoadVectorsNullVersusEmptyResult(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.jsonl")
	data := `{"strategy":"AVG","cid":"a","mqAll":[],"cidAll":["a"],"result":null,"error":"IllegalArgumentException: mqAll is null or mqAll empty"}
{"strategy":"AVG","cid":"b","mqAll":[{"topic":"T","brokerName":"b","queueId":7}],"cidAll":["a"],"result":[]}

{"strategy":"CONSISTENT_HASH","vnodes":3,"vnodesDefault":false,"cid":"a","mqAll":[{"topic":"T","brokerName":"b","queueId":-2}],"cidAll":["a"],"result":[0],"memberOfCidAll":true,"scenario":4,"family":"f"}
{"strategy":"AVG","cid":"a","mqAll":null,"cidAll":null}
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	vs, err := LoadVectors(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 4 {
		t.Fatalf("got %d vectors, want 4", len(vs))
	}
	if vs[0].HasResult || vs[0].Result != nil || vs[0].Error == "" {
		t.Errorf("null result: %+v", vs[0])
	}
	if !vs[1].HasResult || vs[1].Result == nil || len(vs[1].Result) != 0 {
		t.Errorf("empty result: %+v", vs[1])
	}
	if vs[1].MemberOfCidAll || vs[1].MQAll[0] != (Queue{Topic: "T", BrokerName: "b", QueueID: 7}) {
		t.Errorf("fields: %+v", vs[1])
	}
	v := vs[2]
	if !v.HasResult || len(v.Result) != 1 || v.Vnodes != 3 || v.VnodesDefault || !v.MemberOfCidAll ||
		v.Scenario != 4 || v.Family != "f" || v.MQAll[0].QueueID != -2 || v.Line != 4 {
		t.Errorf("fields: %+v", v)
	}
	if vs[3].HasResult || vs[3].MQAll != nil || vs[3].CIDAll != nil {
		t.Errorf("absent result: %+v", vs[3])
	}

	if err := os.WriteFile(path, []byte("{\"result\":[1,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadVectors(path); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Errorf("bad JSON: err = %v, want one naming line 1", err)
	}
}

// TestJavaVectorsCheck runs the shared argument check over every vector of every strategy: an error
// exactly where Java threw, with Java's message, and membership as recorded.
func TestJavaVectorsCheck(t *testing.T) {
	vs, err := LoadVectors(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) < 354 {
		t.Fatalf("loaded %d vectors, want at least 354", len(vs))
	}
	const prefix = "IllegalArgumentException: "
	for _, v := range vs {
		err := Check(v.CID, len(v.MQAll), len(v.CIDAll))
		if v.Error != "" {
			if v.HasResult {
				t.Errorf("line %d: vector has both result and error", v.Line)
			}
			if !strings.HasPrefix(v.Error, prefix) {
				t.Errorf("line %d: unexpected Java exception %q", v.Line, v.Error)
				continue
			}
			if err == nil || err.Error() != strings.TrimPrefix(v.Error, prefix) {
				t.Errorf("line %d: Check = %v, want %q", v.Line, err, v.Error)
			}
			continue
		}
		if !v.HasResult {
			t.Errorf("line %d: vector has neither result nor error", v.Line)
		}
		if err != nil {
			t.Errorf("line %d: Check = %v, want nil", v.Line, err)
			continue
		}
		self := IndexOf(v.CID, len(v.CIDAll), func(i int) string { return v.CIDAll[i] })
		if (self >= 0) != v.MemberOfCidAll {
			t.Errorf("line %d: IndexOf = %d, memberOfCidAll = %v", v.Line, self, v.MemberOfCidAll)
		}
	}
}
