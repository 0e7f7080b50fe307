// Package machineroom reproduces RocketMQ's MACHINE_ROOM strategy (Java
// AllocateMessageQueueByMachineRoom): only the queues whose broker name is "ROOM@broker" with ROOM
// in the configured set (consumeridcs) are allocated, in blocks of |P|/c per consumer, then at most
// one leftover each, round-robin. Queues of other rooms go to no one.
//
// ParseRooms, Filter and Allocate are pure computation and allocate nothing beyond appending to
// their slices; Info and Prepare are the plugin (plugin.go), which plugins/machineroom/wasm
// registers.
package machineroom

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/allocd/allocd/plugins/rocketmq"
)

// ErrRoomsNotSet is Java's NullPointerException of an unset consumeridcs, which it throws once a
// broker name has two parts. Its message says what is missing and quotes Java's.
var ErrRoomsNotSet = errors.New(`machineroom: config "consumeridcs" was never set, and a broker name has the form ROOM@broker ` +
	`(Java: NullPointerException: Cannot invoke "java.util.Set.contains(Object)" because "this.consumeridcs" is null)`)

// Rooms is the configured set. The zero Rooms is Java's never-set set (null).
type Rooms struct {
	set   bool
	names []string // sorted, distinct
}

// ParseRooms reads the config value of "consumeridcs": a JSON array of room names. present is
// false when the binding has no such key; it and the JSON text null mean never set. Matching is
// exact and case-sensitive; the empty room "" may be listed.
//
// Example: ParseRooms(`["IDC1","IDC2"]`, true).
func ParseRooms(text string, present bool) (Rooms, error) {
	if !present || text == "null" {
		return Rooms{}, nil
	}
	var names []string
	if err := json.Unmarshal([]byte(text), &names); err != nil || names == nil {
		return Rooms{}, errors.New(`machineroom: config "consumeridcs" is not a JSON array of room names: ` + text)
	}
	slices.Sort(names)
	return Rooms{set: true, names: slices.Compact(names)}, nil
}

// NewRooms is the set of the given names.
func NewRooms(names ...string) Rooms {
	return Rooms{set: true, names: slices.Compact(slices.Sorted(slices.Values(names)))}
}

// Set reports whether the set was given at all.
func (r Rooms) Set() bool { return r.set }

// Contains reports whether room is in the set.
func (r Rooms) Contains(room string) bool {
	_, ok := slices.BinarySearch(r.names, room)
	return ok
}

// Filter appends to p, in mqAll order, the index of every queue of the n queues (broker(i) giving
// queue i's broker name) whose broker name splits, as Java's split("@"), into exactly two parts,
// the first in rooms: Java's premqAll. With rooms never set, the first such broker name is
// ErrRoomsNotSet; without one, p is empty whatever the set.
func Filter(p []int, rooms Rooms, n int, broker func(int) string) ([]int, error) {
	// mqAll is sorted, so a broker's queues come in a run: split and look up once per run.
	last, keep := "", false
	for i := 0; i < n; i++ {
		b := broker(i)
		if i == 0 || b != last {
			last = b
			room, ok := rocketmq.BrokerRoom(b)
			if ok && !rooms.set {
				return p, ErrRoomsNotSet
			}
			keep = ok && rooms.Contains(room)
		}
		if keep {
			p = append(p, i)
		}
	}
	return p, nil
}

// Allocate appends to dst what the consumer at index self of c consumers gets of the filtered
// queues p: p[self*m : self*m+m] with m = len(p)/c, then p[self+m*c] when self < len(p) mod c.
// Callers run rocketmq.Check first; self < 0 (not a member), self >= c or c <= 0 append nothing.
//
// Example: len(p)=5, c=2 gives p[0] p[1] p[4] and p[2] p[3].
func Allocate(dst, p []int, c, self int) []int {
	if c <= 0 || self < 0 || self >= c {
		return dst
	}
	m, rem := len(p)/c, len(p)%c
	dst = append(dst, p[self*m:self*m+m]...)
	if self < rem {
		dst = append(dst, p[self+m*c])
	}
	return dst
}
