// Package plugin is the Go SDK for allocd strategy plugins, on top of the Extism Go PDK.
//
// A plugin registers one function with RocketMQ's shape, allocate(group, cid, mqAll, cidAll),
// from an init function; the SDK exports what ABI v1 requires (allocate, allocd_describe,
// allocd_abi_version), reads the request and writes the answer with one host call each way,
// runs the function once for every consumer the request asks about, and reports errors and logs
// to the host:
//
//	package main
//
//	import "github.com/allocd/allocd/abi/plugin"
//
//	func init() {
//		plugin.Register(plugin.Info{Name: "first", Version: "1.0.0"},
//			func(a *plugin.Args, dst []int) ([]int, error) {
//				if a.Self == 0 { // the first consumer takes everything
//					for i := 0; i < a.MQAll.Len(); i++ {
//						dst = append(dst, i)
//					}
//				}
//				return dst, nil
//			})
//	}
//
//	func main() {}
//
// Build it with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o first.wasm.
//
// A strategy whose lists are in mqAll order can also register a whole-group form with
// RegisterWholeGroup: for a whole-group request from a 1.1 host it writes one owner per queue
// (ABI 1.1's owner form), which costs a fraction of one call per consumer.
package plugin

import (
	"slices"

	"github.com/allocd/allocd/abi"
)

// Info is the plugin's self-description.
type Info = abi.Info

// Args are the arguments of one allocate call for one consumer. The SDK reuses Args, the
// Request view and its buffers from call to call, so none of them may be kept after the
// strategy returns; the strings they give (Group, CID, consumer ids, queue names, labels) stay
// valid and unchanged, and may be kept.
type Args struct {
	// Group is the consumer group (RocketMQ uses it only in log text).
	Group string
	// CID is the consumer to compute for.
	CID string
	// Self is the index of the first occurrence of CID in CIDAll, or -1 when CID is not a member.
	Self int
	// MQAll and CIDAll are the group's queues and consumers, in canonical order.
	MQAll  Queues
	CIDAll Consumers
	// Request gives the rest of ABI v1: per-queue and per-consumer attributes, previous owners
	// and the binding's configuration.
	Request *abi.View
}

// Config returns the binding's setting for key, or def when the binding does not set it.
func (a *Args) Config(key, def string) string {
	if v, ok := a.Request.Config(key); ok {
		return v
	}
	return def
}

// Queues is mqAll, read lazily from the request.
type Queues struct{ v *abi.View }

// Len is len(mqAll).
func (q Queues) Len() int { return q.v.NumQueues() }

// At returns mqAll[i].
func (q Queues) At(i int) abi.Queue { return q.v.Queue(i) }

// Consumers is cidAll, read lazily from the request.
type Consumers struct{ v *abi.View }

// Len is len(cidAll).
func (c Consumers) Len() int { return c.v.NumConsumers() }

// At returns cidAll[i].
func (c Consumers) At(i int) string { return c.v.Consumer(i) }

// Func is a strategy: it appends to dst the indices into a.MQAll of the queues that a.CID owns, in
// the order the strategy defines, and returns the extended slice. An error fails this consumer's
// result only.
type Func func(a *Args, dst []int) ([]int, error)

// Prepare runs once per request, before Func runs for each consumer: it is where a strategy
// builds what all consumers share (a hash ring, a weight table). An error fails the whole call.
type Prepare func(req *abi.View) (Func, error)

// WholeGroup is the whole-group form of a strategy, for a request that asks for every consumer:
// it sets owners[q], for every queue q of mqAll (len(owners) == req.NumQueues()), to the index in
// cidAll of the consumer that owns it, or abi.NoOwner, and returns true. Each consumer's answer is
// then its queues in mqAll order, so the form suits strategies whose lists have that order (AVG,
// AVG_BY_CIRCLE, CONSISTENT_HASH). cidAll has no repeated id when it is called. It returns false
// to have the SDK run the per-consumer Func instead (for a request its checks would fail for some
// consumer); an error fails the whole call.
type WholeGroup func(req *abi.View, owners []int32) (bool, error)

var (
	info       abi.Info
	prepare    Prepare
	wholeGroup WholeGroup
)

// Register installs the plugin's strategy. Call it once, from an init function.
func Register(i Info, f Func) {
	RegisterPrepared(i, func(*abi.View) (Func, error) { return f, nil })
}

// RegisterPrepared installs a strategy with a per-request preparation step.
func RegisterPrepared(i Info, p Prepare) {
	if prepare != nil {
		panic("plugin: Register called twice")
	}
	info, prepare = i, p
}

// RegisterWholeGroup installs a strategy with both forms: p (as RegisterPrepared) answers one
// consumer at a time, w the whole group in one pass. The SDK calls w for a whole-group request
// from a host that reads ABI 1.1's owner form (ABI.md §5.4), and answers with one owner index per
// queue (4 bytes a queue); for any other request, or when w returns false, it runs p's Func for
// each target. The two must give the same answers.
func RegisterWholeGroup(i Info, p Prepare, w WholeGroup) {
	RegisterPrepared(i, p)
	wholeGroup = w
}

// Allocate runs the registered strategy over an encoded request and returns the encoded answer,
// with no host calls: the exports use it, and so can a plugin's native tests and benchmarks.
// Strings the strategy is given alias input.
func Allocate(input []byte) ([]byte, error) {
	var c call
	if err := c.v.Parse(input); err != nil {
		return nil, err
	}
	return c.run()
}

// call is the state of one allocate call. The wasm export keeps one for the life of the
// instance, which serves one call at a time, so that a call allocates nothing the next one
// cannot reuse.
type call struct {
	v      abi.View
	w      abi.ResponseWriter
	a      Args
	dst    []int
	owners []int32 // where the answer cannot hold them (OwnersResponse)
	out    []byte  // the owner-form answer
}

// run runs the strategy over the parsed request c.v and returns the encoded answer, which aliases
// c's storage: the owner form when the request allows it and the strategy has a whole-group
// form, else one result per target written with c.w.
func (c *call) run() ([]byte, error) {
	if prepare == nil {
		return nil, errNotRegistered
	}
	v := &c.v
	if wholeGroup != nil && v.AcceptsOwners() && v.DistinctConsumers() {
		// The strategy writes the owners into the answer itself where the machine's int32s are
		// the wire's (a wasm guest's are).
		var owners []int32
		c.out, owners = abi.OwnersResponse(c.out, v.NumQueues())
		inPlace := owners != nil
		if !inPlace {
			c.owners = slices.Grow(c.owners[:0], v.NumQueues())[:v.NumQueues()]
			owners = c.owners
		}
		ok, err := wholeGroup(v, owners)
		if err == nil {
			err = v.Err()
		}
		if err != nil {
			return nil, err
		}
		if ok {
			if !inPlace {
				c.out = abi.AppendOwners(c.out[:0], owners)
			}
			return c.out, nil
		}
	}
	if err := c.runEach(); err != nil {
		return nil, err
	}
	return c.w.Bytes(), nil
}

// runEach runs the strategy's Func for every target and writes the answer with c.w.
func (c *call) runEach() error {
	v := &c.v
	f, err := prepare(v)
	if err == nil {
		err = v.Err()
	}
	if err != nil {
		return err
	}
	c.a = Args{Group: v.Group(), MQAll: Queues{v}, CIDAll: Consumers{v}, Request: v}
	c.w.Reset(c.w.Bytes()[:0])
	for t, n := 0, v.NumTargets(); t < n; t++ {
		c.a.CID, c.a.Self = v.TargetAt(t)
		res, err := f(&c.a, c.dst[:0])
		if err != nil {
			c.w.Error(err.Error())
			continue
		}
		c.w.Indices(res)
		// The strategy appended to dst, or returned storage of its own, which must not be
		// handed back to it as dst: keep the SDK's buffer, grown to the largest result.
		if cap(c.dst) < len(res) {
			c.dst = make([]int, 0, len(res))
		}
	}
	// A queue record the strategy read named a string the request lacks: what it computed
	// from the empty names it was given must not be passed on.
	return v.Err()
}

// stringChunks keeps copies of requests' string tables in append-only chunks: a string handed to
// a strategy is never overwritten, and a call allocates only when a chunk fills up, about once in
// 70 whole-group calls of 1024 queues and 64 consumers (RATIONALE.md).
type stringChunks struct{ chunk []byte }

const stringChunkSize = 64 << 10

func (s *stringChunks) store(table []byte) []byte {
	if cap(s.chunk)-len(s.chunk) < len(table) {
		s.chunk = make([]byte, 0, max(stringChunkSize, len(table)))
	}
	n := len(s.chunk)
	s.chunk = append(s.chunk, table...)
	return s.chunk[n:len(s.chunk):len(s.chunk)]
}

type sdkError string

func (e sdkError) Error() string { return string(e) }

const errNotRegistered = sdkError("plugin: no strategy registered (call plugin.Register from an init function)")
