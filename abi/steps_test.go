package abi

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"slices"
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

// runIDsByOne is runIDs' definition, one record at a time.
func runIDsByOne(q []byte, names uint64, ids []int32) int {
	n := 0
	for ; len(q) >= 12 && n < len(ids) && binary.LittleEndian.Uint64(q) == names; q = q[12:] {
		ids[n] = int32(binary.LittleEndian.Uint32(q[8:]))
		n++
	}
	return n
}

// TestRunIDs: runIDs (four records a step; in the guest, queuerun_wasm.s) agrees with its
// definition on runs that end at every record of the first few dozen, with the other names in
// the topic's or the broker's half, or the run going on to the end; on a few bytes more than
// whole records; and with ids shorter, as long and longer than the run. What it writes past its
// count is nothing: the rest of ids keeps what it held.
func TestRunIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const names = uint64(7)<<32 | 5
	for records := 0; records <= 40; records++ {
		for extra := range 3 { // bytes past the last whole record
			for end := 0; end <= records; end++ { // the first record of other names (records: none)
				q := make([]byte, 12*records+extra)
				for k := range records {
					rec := q[12*k:]
					other := names
					if k >= end {
						other ^= []uint64{1, 1 << 32, 1 << 63}[r.IntN(3)]
					}
					binary.LittleEndian.PutUint64(rec, other)
					binary.LittleEndian.PutUint32(rec[8:], r.Uint32())
				}
				for _, room := range []int{0, 1, end / 2, end, end + 1, end + 5, records + 4} {
					got := make([]int32, room)
					want := make([]int32, room)
					for i := range got {
						got[i], want[i] = -7, -7
					}
					n, wn := runIDs(q, names, got), runIDsByOne(q, names, want)
					if n != wn || !slices.Equal(got, want) {
						t.Fatalf("%d records (+%d bytes), run of %d, room for %d: runIDs gives %d %v, want %d %v",
							records, extra, end, room, n, got, wn, want)
					}
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
	"TestViewQueueRun", "TestViewQueueRunRandom", "TestRunIDs", "TestViewSameConsumers",
}

// TestGuest runs guestTests in a wasm guest.
func TestGuest(t *testing.T) {
	if runtime.GOARCH == "wasm" {
		t.Skip("this is the guest already") // the guest runs guestTests only
	}
	wasmbuild.GuestTests(t, "abi", guestTests)
}
