package strategy

import (
	"testing"

	"github.com/allocd/allocd/abi"
)

// sameQueues accepts only a list queue by queue equal to the last one, with nothing the last
// one's requests did not carry.
func TestSameQueues(t *testing.T) {
	last := []abi.Queue{{Topic: "T", BrokerName: "a", QueueID: 0}, {Topic: "T", BrokerName: "a", QueueID: 1}}
	same := func() []Queue {
		return []Queue{{Topic: "T", BrokerName: "a", QueueID: 0}, {Topic: "T", BrokerName: "a", QueueID: 1}}
	}
	if !sameQueues(same(), last) {
		t.Fatal("an equal list is not the same")
	}
	for name, change := range map[string]func(qs []Queue) []Queue{
		"shorter":    func(qs []Queue) []Queue { return qs[:1] },
		"topic":      func(qs []Queue) []Queue { qs[1].Topic = "U"; return qs },
		"broker":     func(qs []Queue) []Queue { qs[1].BrokerName = "b"; return qs },
		"queue id":   func(qs []Queue) []Queue { qs[1].QueueID = 2; return qs },
		"labels":     func(qs []Queue) []Queue { qs[0].Labels = map[string]string{"zone": "z"}; return qs },
		"metrics":    func(qs []Queue) []Queue { qs[0].Metrics = map[string]int64{"lag": 1}; return qs },
		"prev owner": func(qs []Queue) []Queue { qs[1].PrevOwner = "c1"; return qs },
	} {
		if sameQueues(change(same()), last) {
			t.Errorf("%s changed: still the same list", name)
		}
	}
}
