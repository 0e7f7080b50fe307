package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/coordinator"
)

// BenchmarkHeartbeatHandler is one member's steady heartbeat (nothing changes, the generation
// it applied reported) through the server's handler, without the network: JSON in and out,
// the coordinator, the request metrics. The fleet benchmark's daemon CPU is mostly this.
//
//	go test -run '^$' -bench HeartbeatHandler -count 6 ./server/
func BenchmarkHeartbeatHandler(b *testing.B) {
	s, c, clock := newBenchServer(b)
	c.PutTopic("T", []coordinator.Broker{{Name: "broker-a", ReadQueues: 16, WriteQueues: 16}, {Name: "broker-b", ReadQueues: 16, WriteQueues: 16}})
	c.PutGroup("g", coordinator.Binding{Strategy: "averagely"})
	for i := range 100 {
		c.Heartbeat("g", coordinator.Heartbeat{CID: fmt.Sprintf("10.0.0.%d@%d", i, 1000+i), Topics: []string{"T"}})
	}
	clock.Advance(time.Second)
	c.Tick(b.Context())
	body := `{"cid":"10.0.0.7@1007","topics":["T"],"generations":{"T":1},"confirms":true}`
	h := s.Handler()
	serve := func(b *testing.B) {
		req := httptest.NewRequest("POST", "/v1/groups/g/heartbeat", strings.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("heartbeat: %d %s", w.Code, w.Body)
		}
	}
	// "warm": one goroutine serves them all, as HTTP/1.1's connection goroutine does;
	// "fresh-goroutine": each on a goroutine of its own, as HTTP/2 serves each stream, which
	// starts with a small stack that deep frames make the runtime copy.
	b.Run("warm", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			serve(b)
		}
	})
	b.Run("fresh-goroutine", func(b *testing.B) {
		b.ReportAllocs()
		done := make(chan struct{})
		for b.Loop() {
			go func() {
				defer func() { done <- struct{}{} }()
				serve(b)
			}()
			<-done
		}
	})
}
