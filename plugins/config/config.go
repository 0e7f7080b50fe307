// Package config reproduces RocketMQ's CONFIG strategy (Java AllocateMessageQueueByConfig): each
// consumer is given the list it was configured with, whatever the group looks like. In allocd the
// list is the consumer's label "queues" (rocketmq.LabelQueues), a JSON array of
// {"topic","brokerName","queueId"} objects, so each member carries its own list as each Java
// client constructs its own strategy.
//
// Like Java, nothing is checked: the answer is the list in its order, duplicates kept, and two
// consumers' lists may overlap. Unlike Java, which returns its list to any caller, a queue that is
// not in mqAll is left out (allocd answers with indices into mqAll), and a consumer that is not in
// cidAll gets nothing (it has no label). Parse and Allocate are pure computation; Info and Prepare
// are the plugin (plugin.go), which plugins/config/wasm registers.
package config

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/allocd/allocd/abi"
)

// Parse reads a consumer's label "queues". The text "null" is Java's never-set list: nothing.
// Every element must be an object with a string "topic", a string "brokerName" and an integer
// "queueId"; anything else is an error naming the element.
//
// Example: Parse(`[{"topic":"T","brokerName":"b","queueId":3}]`).
func Parse(text string) ([]abi.Queue, error) {
	var raw []struct {
		Topic      *string `json:"topic"`
		BrokerName *string `json:"brokerName"`
		QueueID    *int32  `json:"queueId"`
	}
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return nil, errors.New("not a JSON array of {\"topic\",\"brokerName\",\"queueId\"} objects: " + err.Error())
	}
	out := make([]abi.Queue, len(raw))
	for i, q := range raw {
		if q.Topic == nil || q.BrokerName == nil || q.QueueID == nil {
			return nil, errors.New("element " + strconv.Itoa(i) + " lacks \"topic\", \"brokerName\" or \"queueId\"")
		}
		out[i] = abi.Queue{Topic: *q.Topic, BrokerName: *q.BrokerName, QueueID: *q.QueueID}
	}
	return out, nil
}

// Allocate appends to dst, in the list's order and with its duplicates, the index into mqAll of
// every queue of list. mqAll has n queues, queue(i) giving queue i, in canonical order
// (abi.CompareQueues, as the host sorts it), so each lookup is a binary search; a repeated queue
// in mqAll resolves to its first index. A listed queue that is not in mqAll is left out; missing
// counts those and first is the first of them.
func Allocate(dst []int, list []abi.Queue, n int, queue func(int) abi.Queue) (out []int, missing int, first abi.Queue) {
	for _, q := range list {
		lo, hi := 0, n
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if abi.CompareQueues(queue(m), q) < 0 {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo < n && queue(lo) == q {
			dst = append(dst, lo)
			continue
		}
		if missing == 0 {
			first = q
		}
		missing++
	}
	return dst, missing, first
}
