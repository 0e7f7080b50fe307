package host_test

// Benchmarks of issue 15: the three RocketMQ room strategies on a whole group of 1024 queues and
// 64 consumers in 8 rooms, next to averagely on the same request. BENCHMARKS.md records the
// command and the figures.

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/plugins/config"
	"github.com/allocd/allocd/plugins/machineroom"
	"github.com/allocd/allocd/plugins/nearby"
	"github.com/allocd/allocd/plugins/rocketmq"
)

const benchRooms = 8

// Inputs of roomsRequest beyond the queues and consumers.
const (
	withZones   = 1 << iota // label zone on every queue and consumer (nearby)
	withQueues              // label queues on every consumer (config)
	withRoomSet             // config consumeridcs listing every room (machineroom)
)

// roomsRequest is 1024 queues of TopicTest on 8 brokers IDC<r>@broker-<r> (128 queues each) and
// 64 consumers, 8 per room, asking for every consumer, with what the plugin reads: the queues' and
// consumers' zone IDC<r>; each consumer's CONFIG list (label queues) of 16 queues, the block
// averagely would give it; the set of every room. inner names nearby's inner strategy.
func roomsRequest(with int, inner string) *abi.Request {
	r := &abi.Request{Group: "GID_allocd_bench"}
	var rooms []string
	for b := range benchRooms {
		room := fmt.Sprintf("IDC%d", b)
		rooms = append(rooms, room)
		broker := room + "@broker-" + fmt.Sprint(b)
		for q := range 1024 / benchRooms {
			r.Queues = append(r.Queues, abi.Queue{Topic: "TopicTest", BrokerName: broker, QueueID: int32(q)})
			if with&withZones != 0 {
				r.QueueAttrs = append(r.QueueAttrs, abi.Attrs{Labels: map[string]string{rocketmq.LabelZone: room}})
			}
		}
	}
	if inner != "" {
		r.Config = map[string]string{rocketmq.ConfigInner: inner}
	}
	if with&withRoomSet != 0 {
		text, _ := json.Marshal(rooms)
		r.Config = map[string]string{rocketmq.ConfigConsumerIDCs: string(text)}
	}
	for i := range 64 {
		r.Consumers = append(r.Consumers, fmt.Sprintf("10.0.%d.%d@%d", i%benchRooms, i+1, 4000+i))
	}
	slices.Sort(r.Consumers) // canonical order, so that index j below is consumer j's index
	if with&(withZones|withQueues) == 0 {
		return r
	}
	for j := range r.Consumers {
		labels := map[string]string{}
		if with&withZones != 0 {
			labels[rocketmq.LabelZone] = fmt.Sprintf("IDC%d", j%benchRooms)
		}
		if with&withQueues != 0 {
			type queue struct {
				Topic      string `json:"topic"`
				BrokerName string `json:"brokerName"`
				QueueID    int32  `json:"queueId"`
			}
			var list []queue
			for _, x := range averagely.Allocate(nil, len(r.Queues), len(r.Consumers), j) {
				q := r.Queues[x]
				list = append(list, queue{q.Topic, q.BrokerName, q.QueueID})
			}
			text, _ := json.Marshal(list)
			labels[rocketmq.LabelQueues] = string(text)
		}
		r.ConsumerAttrs = append(r.ConsumerAttrs, abi.Attrs{Labels: labels})
	}
	return r
}

// roomsNative computes every consumer's list with the strategy's package over Go slices.
var roomsNative = map[string]func(r *abi.Request) ([][]int, error){
	"averagely": native["averagely"],
	"config": func(r *abi.Request) ([][]int, error) {
		out := make([][]int, len(r.Consumers))
		at := func(i int) abi.Queue { return r.Queues[i] }
		for j := range r.Consumers {
			list, err := config.Parse(r.ConsumerAttrs[j].Labels[rocketmq.LabelQueues])
			if err != nil {
				return nil, err
			}
			out[j], _, _ = config.Allocate(nil, list, len(r.Queues), at)
		}
		return out, nil
	},
	"machineroom": func(r *abi.Request) ([][]int, error) {
		n, c := len(r.Queues), len(r.Consumers)
		rooms, err := machineroom.ParseRooms(r.Config[rocketmq.ConfigConsumerIDCs], true)
		if err != nil {
			return nil, err
		}
		p, err := machineroom.Filter(nil, rooms, n, func(i int) string { return r.Queues[i].BrokerName })
		if err != nil {
			return nil, err
		}
		out := make([][]int, c)
		for self, cid := range r.Consumers {
			if err := rocketmq.Check(cid, n, c); err != nil {
				return nil, err
			}
			out[self] = machineroom.Allocate(nil, p, c, self)
		}
		return out, nil
	},
	"nearby": func(r *abi.Request) ([][]int, error) {
		inner, err := nearby.ParseInner(r.Config[rocketmq.ConfigInner], "")
		if err != nil {
			return nil, err
		}
		n, c := len(r.Queues), len(r.Consumers)
		g := nearby.New(nearby.Input{
			N: n, C: c,
			Queue: func(i int) (string, string, int32) {
				q := &r.Queues[i]
				return q.Topic, q.BrokerName, q.QueueID
			},
			Consumer: func(j int) string { return r.Consumers[j] },
			QueueRoom: func(i int) (string, bool) {
				z, ok := r.QueueAttrs[i].Labels[rocketmq.LabelZone]
				return z, ok
			},
			ConsumerRoom: func(j int) (string, bool) {
				z, ok := r.ConsumerAttrs[j].Labels[rocketmq.LabelZone]
				return z, ok
			},
		}, inner)
		out := make([][]int, c)
		for self, cid := range r.Consumers {
			if err := rocketmq.Check(cid, n, c); err != nil {
				return nil, err
			}
			if out[self], err = g.Allocate(nil, self); err != nil {
				return nil, err
			}
		}
		return out, nil
	},
}

// BenchmarkRooms computes the whole group's assignment of roomsRequest with each room strategy,
// each on a request with what it reads, and with averagely on the same requests (its time on the
// request with labels is what carrying the labels costs), natively and as wasm through
// Plugin.Allocate, in one run. nearby runs around each of its inner strategies.
func BenchmarkRooms(b *testing.B) {
	for _, c := range []struct {
		name, plugin string
		with         int
		inner        string
	}{
		{"averagely", "averagely", 0, ""},
		{"machineroom", "machineroom", withRoomSet, ""},
		{"averagely-zones", "averagely", withZones, ""},
		{"nearby-averagely", "nearby", withZones, "averagely"},
		{"nearby-circle", "nearby", withZones, "circle"},
		{"nearby-hash", "nearby", withZones, "hash"},
		{"averagely-queues", "averagely", withQueues, ""},
		{"config", "config", withQueues, ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			want, err := roomsNative[c.plugin](roomsRequest(c.with, c.inner))
			if err != nil {
				b.Fatal(err)
			}
			if n := len(slices.Concat(want...)); n != 1024 {
				b.Fatalf("%d queues assigned, want 1024", n)
			}
			b.Run("native", func(b *testing.B) {
				req := roomsRequest(c.with, c.inner)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := roomsNative[c.plugin](req); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("wasm", func(b *testing.B) {
				benchAllocate(b, newRuntime(b, host.Config{}), c.plugin, roomsRequest(c.with, c.inner), want)
			})
		})
	}
}
