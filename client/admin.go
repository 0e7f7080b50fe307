package client

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/allocd/allocd/autoscale"
)

// PutTopic creates or replaces a topic with its brokers, without auto-scaling (a policy the
// topic had is removed). It returns the topic as stored.
func (c *Client) PutTopic(ctx context.Context, name string, brokers []Broker) (Topic, error) {
	return c.PutTopicAutoscale(ctx, name, brokers, nil)
}

// PutTopicAutoscale creates or replaces a topic with its brokers and its auto-scaling policy
// (nil: none). Start from autoscale.DefaultPolicy() and set Enabled, for one. While a topic is
// auto-scaled the daemon owns the queue counts of the brokers it already has: the counts given
// for those are ignored. It returns the topic as stored.
func (c *Client) PutTopicAutoscale(ctx context.Context, name string, brokers []Broker, policy *autoscale.Policy) (Topic, error) {
	var t Topic
	err := c.do(ctx, "PUT", "/v1/topics/"+seg(name), nil, struct {
		Brokers   []Broker          `json:"brokers"`
		Autoscale *autoscale.Policy `json:"autoscale,omitempty"`
	}{brokers, policy}, &t, 0)
	return t, err
}

// GetTopic returns a topic; IsNotFound(err) when there is none.
func (c *Client) GetTopic(ctx context.Context, name string) (Topic, error) {
	var t Topic
	err := c.do(ctx, "GET", "/v1/topics/"+seg(name), nil, nil, &t, 0)
	return t, err
}

// ListTopics returns every topic, sorted by name.
func (c *Client) ListTopics(ctx context.Context) ([]Topic, error) {
	var r struct {
		Topics []Topic `json:"topics"`
	}
	err := c.do(ctx, "GET", "/v1/topics", nil, nil, &r, 0)
	return r.Topics, err
}

// DeleteTopic removes a topic; IsNotFound(err) when there was none.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", "/v1/topics/"+seg(name), nil, nil, nil, 0)
}

// GetRoute returns a topic's writable queues, the list producers choose from.
func (c *Client) GetRoute(ctx context.Context, topic string) (Route, error) {
	var r Route
	err := c.do(ctx, "GET", "/v1/topics/"+seg(topic)+"/route", nil, nil, &r, 0)
	return r, err
}

// RouteKey returns the queue sharding key key maps to, as the daemon computes it. A
// Producer's ForKey gives the same queue without asking.
func (c *Client) RouteKey(ctx context.Context, topic, key string) (Queue, error) {
	var r Route
	if err := c.do(ctx, "GET", "/v1/topics/"+seg(topic)+"/route", url.Values{"key": {key}}, nil, &r, 0); err != nil {
		return Queue{}, err
	}
	if r.Queue == nil {
		return Queue{}, &Error{Method: "GET", Path: "/v1/topics/" + topic + "/route", StatusCode: 200, Message: "the answer names no queue"}
	}
	return *r.Queue, nil
}

// PutGroup creates a group or replaces its binding. It returns the group as stored, with the
// defaults filled in.
func (c *Client) PutGroup(ctx context.Context, name string, b Binding) (Group, error) {
	var g Group
	err := c.do(ctx, "PUT", "/v1/groups/"+seg(name), nil, b, &g, 0)
	return g, err
}

// GetGroup returns a group's binding, live members and per topic the generation in force.
func (c *Client) GetGroup(ctx context.Context, name string) (GroupStatus, error) {
	var g GroupStatus
	err := c.do(ctx, "GET", "/v1/groups/"+seg(name), nil, nil, &g, 0)
	return g, err
}

// ListGroups returns every group with its member count, sorted by name.
func (c *Client) ListGroups(ctx context.Context) ([]GroupSummary, error) {
	var r struct {
		Groups []GroupSummary `json:"groups"`
	}
	err := c.do(ctx, "GET", "/v1/groups", nil, nil, &r, 0)
	return r.Groups, err
}

// DeleteGroup removes a group, its members and its generations.
func (c *Client) DeleteGroup(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", "/v1/groups/"+seg(name), nil, nil, nil, 0)
}

// Preview asks what binding b would assign on the group's live members, next to what is in
// force, and what would move. Nothing changes.
func (c *Client) Preview(ctx context.Context, group string, b Binding) (Preview, error) {
	var p Preview
	err := c.do(ctx, "POST", "/v1/groups/"+seg(group)+"/preview", nil, b, &p, 0)
	return p, err
}

// ListPlugins returns the status of every strategy plugin the daemon knows.
func (c *Client) ListPlugins(ctx context.Context) ([]PluginStatus, error) {
	var r struct {
		Plugins []PluginStatus `json:"plugins"`
	}
	err := c.do(ctx, "GET", "/v1/plugins", nil, nil, &r, 0)
	return r.Plugins, err
}

// GetPlugin returns one plugin's status.
func (c *Client) GetPlugin(ctx context.Context, name string) (PluginStatus, error) {
	var p PluginStatus
	err := c.do(ctx, "GET", "/v1/plugins/"+seg(name), nil, nil, &p, 0)
	return p, err
}

// Ready returns nil when the daemon answers /readyz with 200.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, "GET", "/readyz", nil, nil, nil, 0)
}

// Heartbeat sends one heartbeat of a member, joining it if new, and returns its assignment.
// Consumer sends them for you; this is the single call, for tools and tests. Heartbeats sent
// at the same moment through one Client share a request (batch.go, WithHeartbeatBatching).
func (c *Client) Heartbeat(ctx context.Context, group string, hb Heartbeat) (MemberAssignment, error) {
	if hb.Topics == nil {
		hb.Topics = []string{}
	}
	if !c.batch.off.Load() && c.baseErr == nil {
		if a, alone, err := c.batchHeartbeat(ctx, group, hb); !alone {
			return a, err
		}
	}
	var a MemberAssignment
	err := c.do(ctx, "POST", "/v1/groups/"+seg(group)+"/heartbeat", nil, hb, &a, 0)
	return a, err
}

// Leave removes a member at once. It reports whether the member was there.
func (c *Client) Leave(ctx context.Context, group, cid string) (bool, error) {
	var r struct {
		Removed bool `json:"removed"`
	}
	err := c.do(ctx, "POST", "/v1/groups/"+seg(group)+"/leave", nil, struct {
		CID string `json:"cid"`
	}{cid}, &r, 0)
	return r.Removed, err
}

// PollAssignment long-polls a member's assignment of topic (every topic it subscribes to if
// topic is ""): it answers at once if the generation is newer than after, otherwise when it
// changes or wait ends (the daemon caps wait; 0 answers at once). IsNotFound(err) when the
// member is unknown: it must heartbeat first. Long-polls that wait share requests with the
// Client's other long-polls (pollbatch.go, WithPollBatching).
func (c *Client) PollAssignment(ctx context.Context, group, cid, topic string, after int64, wait time.Duration) (MemberAssignment, error) {
	if wait > 0 && !c.polls.off.Load() && c.baseErr == nil {
		if a, alone, err := c.batchPoll(ctx, group, cid, topic, after, wait); !alone {
			return a, err
		}
	}
	q := url.Values{"cid": {cid}, "after": {strconv.FormatInt(max(after, 0), 10)}, "wait": {wait.String()}}
	if topic != "" {
		q.Set("topic", topic)
	}
	var a MemberAssignment
	err := c.do(ctx, "GET", "/v1/groups/"+seg(group)+"/assignment", q, nil, &a, wait+c.timeout)
	return a, err
}
