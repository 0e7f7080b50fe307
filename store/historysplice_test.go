package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
)

// The packed history record, its codes put in after encoding/json wrote the rest, is byte for
// byte what encoding/json writes for the record with its codes in place, also when the strings
// before them spell the placeholders' keys (escaped, they are not keys), and without pending
// handoffs or moves.
func TestPackedHistorySplice(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := func(broker string, id int32) abi.Queue { return abi.Queue{Topic: "T", BrokerName: broker, QueueID: id} }
	hostile := []string{`"packedMoves":{"format":"x"`, `"moves":""`, `"pending":"-"`, `<&>`}
	for _, withPending := range []bool{true, false} {
		for _, withMoves := range []bool{true, false} {
			e := model.HistoryEntry{Group: "g", Topic: "T", Generation: 4, At: at, Handoff: model.HandoffCooperative,
				Trigger: model.Trigger{Causes: []string{model.CauseJoined}, Joined: hostile, Left: hostile}}
			pk := NewMovesPacker()
			if withMoves {
				for id := range int32(300) {
					pk.Move(q("b", id), pk.Client(hostile[id%4]), pk.Client(`"moves":"`))
				}
			}
			if withPending {
				pk.Pending(q("b", 7), pk.Client(hostile[0]), pk.Client(hostile[2]), at, at.Add(time.Minute))
			}
			got, err := MarshalPackedHistoryEntry(e, pk)
			if err != nil {
				t.Fatal(err)
			}
			p := *pk.p
			p.Moves = base64.RawStdEncoding.EncodeToString(pk.moves.buf)
			if pk.pendings > 0 {
				p.Pending = base64.RawStdEncoding.EncodeToString(pk.pending.buf)
			}
			want, err := json.Marshal(historyRecord{HistoryEntry: e, Packed: &p})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("pending %v, moves %v: wrote\n%s\nencoding/json writes\n%s", withPending, withMoves, got, want)
			}
		}
	}
	if _, err := splicePackedMoves(nil, []byte(`{"moves":""}`), []byte{1}, false, nil); err == nil {
		t.Error("a record without packed moves was spliced")
	}
	if _, err := splicePackedMoves(nil, []byte(`{"packedMoves":{"moves":"x"}}`), []byte{1}, false, nil); err == nil {
		t.Error("a record without the moves' placeholder was spliced")
	}
	if _, err := splicePackedMoves(nil, []byte(`{"packedMoves":{"moves":""}}`), []byte{1}, true, []byte{2}); err == nil {
		t.Error("a record without the pending placeholder was spliced")
	}
}
