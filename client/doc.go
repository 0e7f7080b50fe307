// Package client is the Go client of the allocd daemon's HTTP API (`allocd serve`).
//
// A Client is one daemon's address and HTTP connections; share it. Its methods are thin, typed
// calls of the API: PutTopic, PutTopicAutoscale, GetTopic, ListTopics, DeleteTopic, GetRoute,
// RouteKey, PutGroup, GetGroup, ListGroups, DeleteGroup, Preview, ListPlugins, GetPlugin, and
// the member calls Heartbeat, Leave and PollAssignment. A refusal of the daemon is an *Error carrying the HTTP
// status and the daemon's {"error"} text (IsNotFound, IsConflict, StatusCode).
//
// # Consumers
//
// NewConsumer makes one member of a consumer group. Start joins the group; from then on the
// consumer heartbeats every HeartbeatInterval (reporting the generations it has applied), keeps
// one long-poll per topic open so a new generation arrives as soon as the daemon publishes it,
// and delivers each new generation once, in order, on Assignments. Close leaves the group, so
// the others get its queues at once.
//
//	c := client.New("http://127.0.0.1:7420")
//	cons := c.NewConsumer("orders", client.DefaultCID(), []string{"T"}, client.ConsumerOptions{})
//	if err := cons.Start(ctx); err != nil { ... }
//	defer cons.Close(context.Background())
//	for a := range cons.Assignments() {
//		// consume a.Queues of a.Topic from now on; stop consuming the others
//	}
//
// The consumer never blocks on its reader: while an assignment waits to be read, a newer one of
// the same topic replaces it. While the daemon is unreachable or failing, the consumer retries
// with exponential backoff (RetryMin doubling up to HeartbeatInterval, with jitter) and keeps its
// last assignment in force, as a RocketMQ consumer keeps its queues when a rebalance fails. If
// the daemon forgets the member (it missed its session, or the daemon lost its state), the next
// heartbeat joins it again. Keep HeartbeatInterval at a third of the daemon's --session-timeout
// or less (the defaults, 10s and 30s, are).
//
// The consumers of one Client that heartbeat at the same moment share a request (POST
// /v1/heartbeats), each answered as alone; a process running thousands of members so costs the
// daemon a fraction of a request per heartbeat. WithHeartbeatBatching(false) sends each alone,
// as the client does by itself against a daemon without the endpoint. Their long-polls share
// requests too (POST /v1/assignments, up to 64 polls each), answered when one of them is: the
// others go again with what is left of their waits, so each poll answers as alone, and the
// daemon holds one HTTP/2 stream for many instead of one each. WithPollBatching(false) holds
// each alone.
//
// # Producers
//
// NewProducer chooses queues for one topic from a cached route, the topic's writable queues in
// the daemon's order, fetched on first use, every RefreshInterval, and after Invalidate (call it
// when a send fails). Next goes round-robin; ForKey maps a sharding key to the queue that the
// daemon's GET /v1/topics/{topic}/route?key=K names, by the same function (package route,
// RocketMQ's SelectMessageQueueByHash), so that a key's messages stay in order in one queue.
//
// # Time
//
// Consumers and producers take their time from a Clock (SystemClock unless set), so tests can
// move time instead of sleeping.
package client
