package coordinator

import (
	"github.com/allocd/allocd/abi"
	"testing"
	"time"

	"github.com/allocd/allocd/model"
	"github.com/allocd/allocd/store"
)

// The earliest handoff deadline is found once per generation and follows the generation in
// force; a handoff with no deadline counts as late.
func TestHandoffDeadlineFollowsTheGeneration(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gen := func(deadlines ...time.Time) *store.Generation {
		var hs []model.Handoff
		for i, d := range deadlines {
			hs = append(hs, model.Handoff{Queue: abi.Queue{Topic: "T", BrokerName: "b", QueueID: int32(i)}, From: "a", To: "b", Deadline: d})
		}
		return &store.Generation{Handoffs: store.HandoffsOf(hs)}
	}
	st := &topicState{}
	if d := st.handoffDeadline(); !d.IsZero() || st.anyLate(at) {
		t.Fatalf("no generation: deadline %v, late %v", d, st.anyLate(at))
	}
	st.gen = gen(at.Add(2*time.Minute), at.Add(time.Minute))
	if d := st.handoffDeadline(); !d.Equal(at.Add(time.Minute)) {
		t.Errorf("deadline %v, want %v", d, at.Add(time.Minute))
	}
	if st.anyLate(at.Add(59*time.Second)) || !st.anyLate(at.Add(time.Minute)) {
		t.Error("late before the deadline, or not at it")
	}
	st.gen = gen(at.Add(10 * time.Second))
	if d := st.handoffDeadline(); !d.Equal(at.Add(10 * time.Second)) {
		t.Errorf("after a new generation: deadline %v, want %v", d, at.Add(10*time.Second))
	}
	st.gen = gen(at.Add(5*time.Second), time.Time{})
	if !st.anyLate(at) {
		t.Error("a handoff without a deadline is not late")
	}
	st.gen = gen()
	if d := st.handoffDeadline(); !d.IsZero() || st.anyLate(at.Add(time.Hour)) {
		t.Errorf("no handoffs: deadline %v, late %v", d, st.anyLate(at.Add(time.Hour)))
	}
}
