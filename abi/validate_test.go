package abi_test

import (
	"strings"
	"testing"

	"github.com/allocd/allocd/abi"
)

func queues(topic, broker string, n int) []abi.Queue {
	out := make([]abi.Queue, n)
	for i := range out {
		out[i] = abi.Queue{Topic: topic, BrokerName: broker, QueueID: int32(i)}
	}
	return out
}

func ok(idx ...int) abi.Result { return abi.Result{Indices: idx} }

func TestValidate(t *testing.T) {
	group := &abi.Request{Group: "g", Queues: queues("T", "b", 4), Consumers: []string{"c1", "c2"}}
	dupGroup := &abi.Request{Group: "g", Queues: queues("T", "b", 4), Consumers: []string{"c1", "c1", "c2"}}
	targets := &abi.Request{Group: "g", Queues: queues("T", "b", 4), Consumers: []string{"c1", "c2"}, Targets: []string{"c2", "c9", "c2"}}
	tests := []struct {
		name    string
		req     *abi.Request
		results []abi.Result
		want    []string // substrings of the error; nil for a valid answer
	}{
		{"valid whole group", group, []abi.Result{ok(0, 2), ok(1, 3)}, nil},
		{"partial answer is valid", group, []abi.Result{ok(), ok(3)}, nil},
		{"index too large", group, []abi.Result{ok(0), ok(4)}, []string{"queue index 4", `"c2"`, "out of range [0,4)"}},
		{"negative index", group, []abi.Result{ok(-1), ok()}, []string{"queue index -1", `"c1"`, "[0,4)"}},
		{"index into no queues", &abi.Request{Consumers: []string{"c1"}}, []abi.Result{ok(0)}, []string{"queue index 0", "[0,0)"}},
		{"queue to two consumers", group, []abi.Result{ok(0, 1), ok(2, 1)}, []string{"queue 1", "queueId=1", `both "c1" and "c2"`}},
		{"same queue twice to one consumer", group, []abi.Result{ok(3, 0, 3), ok()}, []string{"queue 3", "given twice", `"c1"`}},
		{"repeated cid in cidAll may share", dupGroup, []abi.Result{ok(0, 1), ok(0, 1), ok(2, 3)}, nil},
		{"repeated cid shares, a third id may not", dupGroup, []abi.Result{ok(0), ok(0), ok(0)}, []string{`both "c1" and "c2"`}},
		{"repeated target may share", targets, []abi.Result{ok(1), ok(), ok(1)}, nil},
		{"non-member target is judged like any", targets, []abi.Result{ok(1), ok(1), ok()}, []string{`both "c2" and "c9"`}},
		{"too few results", group, []abi.Result{ok(0)}, []string{"1 results for 2 consumers"}},
		{"too many results", group, []abi.Result{ok(), ok(), ok()}, []string{"3 results for 2 consumers"}},
		{"explicit targets count", targets, []abi.Result{ok(), ok()}, []string{"2 results for 3 consumers"}},
		{"failed results are skipped", group, []abi.Result{{Failed: true, Err: "no", Indices: []int{0, 0, 99}}, ok(0)}, nil},
		{"empty group, no results", &abi.Request{}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := abi.Validate(tt.req, &abi.Response{Results: tt.results})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted an answer it must refuse (%v)", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "abi: ") {
				t.Errorf("error %q lacks the abi: prefix", err)
			}
		})
	}
}

// TestValidateForOverlapping: a plugin that declares "overlapping" may name a queue twice and
// give it to two consumers; the index range and the result count still hold, and a plugin
// without the property is judged by Validate.
func TestValidateForOverlapping(t *testing.T) {
	req := &abi.Request{Queues: []abi.Queue{{Topic: "T", BrokerName: "b"}, {Topic: "T", BrokerName: "b", QueueID: 1}}, Consumers: []string{"a", "b"}}
	shared := &abi.Response{Results: []abi.Result{{Indices: []int{1, 0, 1}}, {Indices: []int{1}}}}
	over := &abi.Info{Name: "config", Properties: []string{abi.PropPartial, abi.PropOverlapping}}
	if err := abi.ValidateFor(over, req, shared); err != nil {
		t.Fatalf("overlapping: %v", err)
	}
	for _, info := range []*abi.Info{nil, {Name: "plain"}} {
		if err := abi.ValidateFor(info, req, shared); err == nil || !strings.Contains(err.Error(), "twice") {
			t.Fatalf("%v: err = %v, want a queue given twice", info, err)
		}
	}
	for _, bad := range []*abi.Response{
		{Results: []abi.Result{{Indices: []int{2}}, {}}},
		{Results: []abi.Result{{Indices: []int{-1}}, {}}},
		{Results: []abi.Result{{}}},
	} {
		if err := abi.ValidateFor(over, req, bad); err == nil {
			t.Errorf("overlapping accepted %+v", bad)
		}
	}
}
