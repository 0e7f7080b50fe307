package coordinator

import (
	"fmt"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
	"github.com/allocd/allocd/store"
)

// A handoff generation's releases list, for each previous owner in key order, the queues of
// its handoffs that the generation gives to their new owner, in queue order: owners whose
// handoffs interleave keep theirs apart, and a queue still held back is not released.
func TestReleasesByPreviousOwner(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := func(id int32) abi.Queue { return abi.Queue{Topic: "T", BrokerName: "b", QueueID: id} }
	froms := []string{"x", "y", "x", "z", "y", "x", "z", "y"}
	var hs []model.Handoff
	assignment := map[string][]abi.Queue{}
	want := map[string][]abi.Queue{}
	for i, from := range froms {
		h := model.Handoff{Queue: q(int32(i)), From: from, To: "n", Since: at, Deadline: at}
		hs = append(hs, h)
		if i != 4 { // y's second handoff is still held back
			assignment["n"] = append(assignment["n"], h.Queue)
			want[from] = append(want[from], h.Queue)
		}
	}
	st := &topicState{name: "T", gen: &store.Generation{Handoffs: store.HandoffsOf(hs), CIDs: map[string]string{"x": "x@1", "y": "y@1"}}}
	g := &group{keys: map[string]*member{"x": {}, "y": {}}}
	c := &Coordinator{}
	got := c.releases(g, st, &store.Generation{Assignment: assignment}, at)
	wantOut := []model.Release{
		{Member: "x@1", Reason: model.ReleaseConfirmed, Queues: want["x"]},
		{Member: "y@1", Reason: model.ReleaseConfirmed, Queues: want["y"]},
		{Member: "z", Reason: model.ReleaseLeft, Queues: want["z"]},
	}
	if fmt.Sprint(got) != fmt.Sprint(wantOut) {
		t.Fatalf("releases\n%v\nwant\n%v", got, wantOut)
	}
}
