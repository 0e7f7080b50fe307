package abi

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/allocd/allocd/internal/wasmbuild"
)

// stepsByOne is steps' definition, one value at a time.
func stepsByOne(b []byte, prev int64) (or, orLess1, last int64) {
	last = prev
	for ; len(b) >= 4; b = b[4:] {
		a := int64(binary.LittleEndian.Uint32(b))
		or |= a - last
		orLess1 |= a - last - 1
		last = a
	}
	return or, orLess1, last
}

// TestSteps: steps (eight values an iteration; in the guest, steps_wasm.s) agrees with its
// definition on every length up to 100 bytes (whole values and a few bytes more), for runs that
// increase, repeat a value, decrease or wrap past 2^31, with each of those anywhere.
func TestSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 100; n++ {
		for round := range 40 {
			b := make([]byte, n)
			v := uint32(r.IntN(100))
			for i := 0; i+4 <= n; i += 4 {
				switch round % 4 {
				case 0: // increasing
					v += 1 + uint32(r.IntN(3))
				case 1: // increasing with a repeat or a step back now and then
					v += uint32(r.IntN(3)) - uint32(r.IntN(2))
				case 2: // anything
					v = r.Uint32()
				case 3: // increasing, with one value at or past 2^31 somewhere
					v++
					if r.IntN(n/4+1) == 0 {
						v |= 1 << 31
					}
				}
				binary.LittleEndian.PutUint32(b[i:], v)
			}
			for _, prev := range []int64{-1, 0, int64(r.IntN(200))} {
				or, less, last := steps(b, prev)
				wor, wless, wlast := stepsByOne(b, prev)
				if or != wor || less != wless || last != wlast {
					t.Fatalf("%d bytes %x, prev %d: steps gives %d %d %d, want %d %d %d", n, b, prev, or, less, last, wor, wless, wlast)
				}
			}
		}
	}
}

// guestTests are the tests TestGuest runs in the wasm guest, where steps is steps_wasm.s and
// runIDs queuerun_wasm.s: steps against its definition, parsing whole requests (the string
// table's offsets and the consumers' ids are read with steps) good and bad, with the fuzz
// target's seeds, and mqAll's runs.
var guestTests = []string{
	"TestSteps", "TestViewConsumerChecks", "TestViewConsumerChecksLong",
	"TestParseRefusesBadStringOffsets", "TestGolden", "TestRequestRoundTripRandom", "FuzzParseRequest",
	"TestViewQueueRun", "TestViewQueueRunRandom",
}

// TestGuest runs guestTests in a wasm guest.
func TestGuest(t *testing.T) {
	if runtime.GOARCH == "wasm" {
		t.Skip("this is the guest already") // the guest runs guestTests only
	}
	wasmbuild.GuestTests(t, "abi", guestTests)
}
