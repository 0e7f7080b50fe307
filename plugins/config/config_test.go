package config_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/plugins/config"
)

func TestParse(t *testing.T) {
	got, err := config.Parse(`[{"topic":"T","brokerName":"b","queueId":3},{"queueId":-1,"brokerName":"","topic":"日志"}]`)
	want := []abi.Queue{{Topic: "T", BrokerName: "b", QueueID: 3}, {Topic: "日志", BrokerName: "", QueueID: -1}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Parse = %v, %v", got, err)
	}
	if got, err := config.Parse("null"); err != nil || len(got) != 0 {
		t.Fatalf("Parse(null) = %v, %v", got, err)
	}
	for _, bad := range []string{``, `{}`, `[1]`, `[{"topic":"T","brokerName":"b"}]`, `[{"topic":"T","queueId":1}]`,
		`[{"topic":"T","brokerName":"b","queueId":"1"}]`, `[{"topic":"T","brokerName":"b","queueId":4294967296}]`, `[`} {
		if _, err := config.Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
	if _, err := config.Parse(`[{"topic":"T","brokerName":"b","queueId":1},{"topic":"T"}]`); err == nil || !strings.Contains(err.Error(), "element 1") {
		t.Errorf("err = %v, want one naming element 1", err)
	}
}

func TestAllocateKeepsOrderAndDuplicates(t *testing.T) {
	mq := []abi.Queue{{Topic: "T", BrokerName: "a", QueueID: 0}, {Topic: "T", BrokerName: "a", QueueID: 1}, {Topic: "T", BrokerName: "a", QueueID: 1}, {Topic: "T", BrokerName: "b", QueueID: 0}, {Topic: "U", BrokerName: "a", QueueID: 10}, {Topic: "U", BrokerName: "a", QueueID: 2}}
	slices.SortStableFunc(mq, abi.CompareQueues) // canonical order, as the host gives it
	at := func(i int) abi.Queue { return mq[i] }
	list := []abi.Queue{{Topic: "U", BrokerName: "a", QueueID: 10}, {Topic: "T", BrokerName: "a", QueueID: 1}, {Topic: "X", BrokerName: "a", QueueID: 0}, {Topic: "T", BrokerName: "a", QueueID: 0}, {Topic: "U", BrokerName: "a", QueueID: 10}, {Topic: "T", BrokerName: "b", QueueID: 9}}
	got, missing, first := config.Allocate([]int{99}, list, len(mq), at)
	// mqAll sorted: T/a/0, T/a/1, T/a/1, T/b/0, U/a/2, U/a/10; a repeated queue resolves to its first index.
	if want := []int{99, 5, 1, 0, 5}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if missing != 2 || first != (abi.Queue{Topic: "X", BrokerName: "a", QueueID: 0}) {
		t.Fatalf("missing %d, first %v", missing, first)
	}
	if got, missing, _ := config.Allocate(nil, list, 0, at); len(got) != 0 || missing != len(list) {
		t.Fatalf("empty mqAll: %v, %d missing", got, missing)
	}
}

// FuzzParse: any label text parses or fails with an error, never panics; what parses, printed
// back as JSON, parses to the same queues.
func FuzzParse(f *testing.F) {
	f.Add(`[{"topic":"T","brokerName":"b","queueId":3}]`)
	f.Add(`null`)
	f.Add(`[{"topic":1}]`)
	f.Fuzz(func(t *testing.T, text string) {
		qs, err := config.Parse(text)
		if err != nil {
			return
		}
		type queue struct {
			Topic      string `json:"topic"`
			BrokerName string `json:"brokerName"`
			QueueID    int32  `json:"queueId"`
		}
		out := make([]queue, len(qs))
		for i, q := range qs {
			out[i] = queue{q.Topic, q.BrokerName, q.QueueID}
		}
		printed, _ := json.Marshal(out)
		back, err := config.Parse(string(printed))
		if err != nil || !slices.Equal(back, qs) {
			t.Fatalf("%q parsed to %v; printed %s; back %v, %v", text, qs, printed, back, err)
		}
	})
}
