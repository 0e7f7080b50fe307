package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/autoscale"
	"github.com/allocd/allocd/client"
)

func TestAdmin(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.c

	topic, err := c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-b", ReadQueues: 2, WriteQueues: 1}, {Name: "broker-a", ReadQueues: 4, WriteQueues: 4}})
	if err != nil || topic.Name != "T" || len(topic.Brokers) != 2 || topic.Brokers[0].Name != "broker-a" {
		t.Fatalf("PutTopic: %+v, %v", topic, err)
	}
	if got, err := c.GetTopic(ctx, "T"); err != nil || len(got.Brokers) != 2 || got.Brokers[1].WriteQueues != 1 {
		t.Fatalf("GetTopic: %+v, %v", got, err)
	}
	if list, err := c.ListTopics(ctx); err != nil || len(list) != 1 || list[0].Name != "T" {
		t.Fatalf("ListTopics: %+v, %v", list, err)
	}
	r, err := c.GetRoute(ctx, "T")
	if err != nil || len(r.Queues) != 5 || r.Queues[4] != (client.Queue{Topic: "T", BrokerName: "broker-b", QueueID: 0}) {
		t.Fatalf("GetRoute: %+v, %v", r, err)
	}

	g, err := c.PutGroup(ctx, "g", client.Binding{Strategy: "averagely"})
	if err != nil || g.Name != "g" || g.Model != client.Clustering || g.Delivery != client.QueueDelivery {
		t.Fatalf("PutGroup: %+v, %v", g, err)
	}
	if _, err := c.Heartbeat(ctx, "g", client.Heartbeat{CID: "c1", Topics: []string{"T"}, Labels: map[string]string{"zone": "a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(ctx, "g", client.Heartbeat{CID: "c2", Topics: []string{"T"}}); err != nil {
		t.Fatal(err)
	}
	a, err := c.PollAssignment(ctx, "g", "c1", "T", 0, 5*time.Second)
	if err != nil || a.Generations["T"] != 1 || len(a.Queues["T"]) != 3 {
		t.Fatalf("PollAssignment: %+v, %v", a, err)
	}
	st, err := c.GetGroup(ctx, "g")
	if err != nil || st.Strategy != "averagely" || len(st.Members) != 2 || st.Members[0].Labels["zone"] != "a" ||
		st.Topics["T"].Generation != 1 || len(st.Topics["T"].Assignment["c2"]) != 3 {
		t.Fatalf("GetGroup: %+v, %v", st, err)
	}
	if list, err := c.ListGroups(ctx); err != nil || len(list) != 1 || list[0].Members != 2 {
		t.Fatalf("ListGroups: %+v, %v", list, err)
	}

	p, err := c.Preview(ctx, "g", client.Binding{Strategy: "circle"})
	if err != nil || p.Binding.Strategy != "circle" || p.Topics["T"].Generation != 1 || len(p.Topics["T"].Moves) == 0 ||
		p.Topics["T"].Counts["c1"] != (client.Count{Current: 3, Proposed: 3}) {
		t.Fatalf("Preview: %+v, %v", p, err)
	}
	if g, _ := c.GetGroup(ctx, "g"); g.Strategy != "averagely" {
		t.Fatalf("Preview changed the binding to %q", g.Strategy)
	}

	if removed, err := c.Leave(ctx, "g", "c2"); err != nil || !removed {
		t.Fatalf("Leave: %v, %v", removed, err)
	}
	if removed, err := c.Leave(ctx, "g", "c2"); err != nil || removed {
		t.Fatalf("second Leave: %v, %v", removed, err)
	}
	if ps, err := c.ListPlugins(ctx); err != nil || len(ps) != 2 || ps[0].Name != "averagely" {
		t.Fatalf("ListPlugins: %+v, %v", ps, err)
	}
	if p, err := c.GetPlugin(ctx, "circle"); err != nil || p.ActiveHash != "h-circle" {
		t.Fatalf("GetPlugin: %+v, %v", p, err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteGroup(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTopic(ctx, "T"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTopic(ctx, "T"); !client.IsNotFound(err) {
		t.Fatalf("GetTopic after DeleteTopic: %v", err)
	}
}

func TestErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.c

	_, err := c.GetTopic(ctx, "nope")
	var ae *client.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || ae.Message != `topic "nope" not found` || ae.Method != "GET" || ae.Path != "/v1/topics/nope" {
		t.Fatalf("GetTopic of an unknown topic: %#v", err)
	}
	if !strings.Contains(err.Error(), `404 topic "nope" not found`) {
		t.Errorf("error text %q", err)
	}
	// A name with characters the daemon refuses travels escaped and is refused by the daemon.
	if _, err := c.PutTopic(ctx, "a/b c", []client.Broker{{Name: "b", ReadQueues: 1, WriteQueues: 1}}); client.StatusCode(err) == 0 {
		t.Fatalf("PutTopic of a bad name: %v", err)
	}
	if _, err := c.PutTopic(ctx, "T", nil); client.StatusCode(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "no brokers") {
		t.Fatalf("PutTopic without brokers: %v", err)
	}
	if _, err := c.PutGroup(ctx, "g", client.Binding{Strategy: "nope"}); client.StatusCode(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "no such plugin") {
		t.Fatalf("PutGroup with an unknown strategy: %v", err)
	}
	if _, err := c.Heartbeat(ctx, "g", client.Heartbeat{CID: "c1"}); !client.IsNotFound(err) {
		t.Fatalf("Heartbeat to an unknown group: %v", err)
	}
	if _, err := c.PutTopic(ctx, "E", []client.Broker{{Name: "b", ReadQueues: 1, WriteQueues: 0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RouteKey(ctx, "E", "k"); !client.IsConflict(err) {
		t.Fatalf("RouteKey on a topic without writable queues: %v", err)
	}

	// Network errors carry no status, and a context's end is still recognizable.
	dead := client.New("127.0.0.1:1")
	if _, err := dead.GetTopic(ctx, "T"); err == nil || client.StatusCode(err) != 0 {
		t.Fatalf("unreachable daemon: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.GetTopic(cctx, "T"); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled context: %v", err)
	}
	e.down.Store(true)
	if _, err := c.ListTopics(ctx); client.StatusCode(err) != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "down for the test") {
		t.Fatalf("503: %v", err)
	}
}

// TestPutTopicAutoscale: a policy set from Go reaches the daemon, counts of an auto-scaled
// topic's brokers stay the daemon's, and PutTopic without one removes it.
func TestPutTopicAutoscale(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.c
	policy := autoscale.DefaultPolicy()
	policy.Enabled, policy.Min, policy.Max = true, 2, 16
	brokers := []client.Broker{{Name: "broker-a", ReadQueues: 4, WriteQueues: 4}}
	topic, err := c.PutTopicAutoscale(ctx, "T", brokers, &policy)
	if err != nil || topic.Autoscale == nil || !topic.Autoscale.Enabled || topic.Autoscale.Min != 2 || topic.Autoscale.Max != 16 ||
		topic.Autoscale.ExpandWriteDelay != policy.ExpandWriteDelay {
		t.Fatalf("PutTopicAutoscale: %+v, %v", topic, err)
	}
	if got, err := c.GetTopic(ctx, "T"); err != nil || got.Autoscale == nil || *got.Autoscale != policy {
		t.Fatalf("GetTopic: %+v, %v", got, err)
	}
	// Declared again with other counts: the daemon keeps its own for a broker it has.
	again, err := c.PutTopicAutoscale(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: 9, WriteQueues: 9}}, &policy)
	if err != nil || again.Brokers[0].ReadQueues != 4 {
		t.Fatalf("PutTopicAutoscale again: %+v, %v", again, err)
	}
	bad := policy
	bad.Min = 0
	if _, err := c.PutTopicAutoscale(ctx, "T", brokers, &bad); client.StatusCode(err) != http.StatusBadRequest {
		t.Fatalf("a policy with min 0: %v", err)
	}
	if plain, err := c.PutTopic(ctx, "T", brokers); err != nil || plain.Autoscale != nil {
		t.Fatalf("PutTopic removes the policy: %+v, %v", plain, err)
	}
}
