package server

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/coordinator"
)

// appendAssignment writes what encoding/json writes for every Assignment: random ones (nil and
// empty maps and lists, several topics, lost or not) byte for byte, and for those holding a
// string it does not write plainly (quotes, controls, non-ASCII, HTML's characters), encodeJSON
// falls back and still writes encoding/json's bytes.
func TestAppendAssignmentIsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	odd := []string{`a"b`, `a\b`, "a\nb", "zoné", "a<b>&c", "\u2028", "\x7f"}
	name := func() string {
		if rng.IntN(20) == 0 {
			return odd[rng.IntN(len(odd))]
		}
		return fmt.Sprintf("T%d", rng.IntN(50))
	}
	var plain, fell int
	for n := range 2000 {
		var a coordinator.Assignment
		if rng.IntN(6) > 0 {
			a.Generations = map[string]int64{}
			for range rng.IntN(4) {
				a.Generations[name()] = rng.Int64N(1<<40) - 1<<20
			}
		}
		if rng.IntN(6) > 0 {
			a.Queues = map[string][]abi.Queue{}
			for range rng.IntN(4) {
				var qs []abi.Queue
				if rng.IntN(5) > 0 {
					qs = []abi.Queue{}
					for range rng.IntN(5) {
						qs = append(qs, abi.Queue{Topic: name(), BrokerName: name(), QueueID: rng.Int32N(1<<20) - 5})
					}
				}
				a.Queues[name()] = qs
			}
		}
		a.Lost = rng.IntN(4) == 0
		want, err := encodeAny(a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeJSON(a)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d: wrote\n%s\nencoding/json writes\n%s", n, got, want)
		}
		if _, ok := appendAssignment(nil, a); ok {
			plain++
		} else {
			fell++
		}
	}
	if plain < 1000 || fell < 100 {
		t.Fatalf("%d plain cases, %d fallbacks: the cases do not exercise both paths", plain, fell)
	}
}
