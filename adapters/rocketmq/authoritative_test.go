package rocketmq

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/internal/daemontest"
	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/model"
)

// With Authoritative, each consumer joins the daemon's group under its client id and answers
// the daemon's assignment, as the caller's own pointers.
func TestAuthoritativeAnswersTheDaemonsAssignment(t *testing.T) {
	d := daemontest.Start(t, wasmbuild.BuiltinPlugins(t), cacheDir)
	ctx := context.Background()
	admin := client.New(d.URL)
	if _, err := admin.PutTopic(ctx, "TopicTest", []model.Broker{{Name: "broker-a", ReadQueues: 6, WriteQueues: 6}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutGroup(ctx, "CG", model.Binding{Strategy: "circle", Model: model.Clustering, Delivery: model.QueueDelivery}); err != nil {
		t.Fatal(err)
	}
	s, err := NewStrategy(ctx, Config{Daemon: d.URL, Authoritative: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mqAll []*primitive.MessageQueue
	for id := range 6 {
		mqAll = append(mqAll, &primitive.MessageQueue{Topic: "TopicTest", BrokerName: "broker-a", QueueId: id})
	}
	cidAll := []string{"10.0.0.1@1", "10.0.0.2@1"}
	// The daemon coalesces joins into one rebalance: ask until both members are in its answer.
	deadline := time.Now().Add(time.Minute)
	for {
		a, b := s.Allocate("CG", cidAll[0], mqAll, cidAll), s.Allocate("CG", cidAll[1], mqAll, cidAll)
		if same(a, consumer.AllocateByAveragelyCircle("CG", cidAll[0], mqAll, cidAll)) &&
			same(b, consumer.AllocateByAveragelyCircle("CG", cidAll[1], mqAll, cidAll)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's answers %v and %v never became circle's for both members", a, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
