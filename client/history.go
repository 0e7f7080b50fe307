package client

import (
	"context"
	"net/url"
	"strconv"

	"github.com/allocd/allocd/model"
)

// The generation history and a queue's story (GET /v1/groups/{group}/history and /explain),
// and the handoff records, shared with the daemon through package model.
type (
	HandoffMode  = model.HandoffMode
	Handoff      = model.Handoff
	History      = model.History
	HistoryEntry = model.HistoryEntry
	Trigger      = model.Trigger
	Release      = model.Release
	Explanation  = model.Explanation
	OwnerChange  = model.OwnerChange
)

// The handoff modes of a Binding.
const (
	HandoffCooperative = model.HandoffCooperative
	HandoffEager       = model.HandoffEager
)

// History returns up to limit (0: the daemon's default, 50) generations of a (group, topic)
// older than generation before (0: from the newest), newest first. History.Next is the before
// of the next page.
func (c *Client) History(ctx context.Context, group, topic string, limit int, before int64) (History, error) {
	q := url.Values{"topic": {topic}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if before > 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
	var h History
	err := c.do(ctx, "GET", "/v1/groups/"+seg(group)+"/history", q, nil, &h, 0)
	return h, err
}

// Explain returns a queue's owners over the retained history of its group, with what moved it.
func (c *Client) Explain(ctx context.Context, group string, q Queue) (Explanation, error) {
	v := url.Values{"topic": {q.Topic}, "brokerName": {q.BrokerName}, "queueId": {strconv.Itoa(int(q.QueueID))}}
	var ex Explanation
	err := c.do(ctx, "GET", "/v1/groups/"+seg(group)+"/explain", v, nil, &ex, 0)
	return ex, err
}
