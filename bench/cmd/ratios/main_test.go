package main

import (
	"fmt"
	"strings"
	"testing"
)

// round is one run of the benchmark binary as go test prints it: averagely's rows with the
// client at 20 µs, and the times given for the others.
func round(native, wasm, embed float64) string {
	return fmt.Sprintf(`goos: linux
goarch: amd64
pkg: github.com/allocd/allocd/bench
cpu: Test CPU @ 2.00GHz
BenchmarkPeers/averagely/rocketmq-go-2   	    5000	     20000 ns/op	   17664 B/op	     321 allocs/op
BenchmarkPeers/averagely/native-2        	    5000	     %.0f ns/op	   16112 B/op	       5 allocs/op
BenchmarkPeers/averagely/wasm-2          	    5000	     %.0f ns/op	   16136 B/op	       6 allocs/op
BenchmarkPeers/averagely/embed-assign-2  	    5000	     %.0f ns/op	   12064 B/op	      10 allocs/op
BenchmarkHostSide/list-2                 	    5000	      9000 ns/op
PASS
`, native, wasm, embed)
}

func read(t *testing.T, text string) *rows {
	t.Helper()
	rs := &rows{times: map[string][]float64{}, cpus: map[string]bool{}}
	if err := rs.read(strings.NewReader(text), "test.txt"); err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestRatiosPairRoundsAndTakeTheMedian(t *testing.T) {
	// wasm / client per round: 0.3, 0.6, 0.4 -> median 0.4, 2 of 3 within 0.5. embed-assign:
	// 0.45, 0.55, 0.7 -> median 0.55, over. wasm / native: 1.5, 3, 1 -> median 1.5.
	rs := read(t, round(4000, 6000, 9000)+round(4000, 12000, 11000)+round(8000, 8000, 14000))
	if got := rs.times["averagely/wasm"]; len(got) != 3 || got[1] != 12e-6 {
		t.Fatalf("averagely/wasm read as %v, want three rounds, the second 12 µs", got)
	}
	if _, ok := rs.times["list"]; ok {
		t.Fatal("a row of another benchmark was read as one of BenchmarkPeers'")
	}
	table, missed, err := report(rs, goals)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"CPU: Test CPU @ 2.00GHz",
		"| averagely/wasm / averagely/rocketmq-go | 0.40x | 0.30-0.60x | ≤ 0.50x | 2 of 3 |",
		"| averagely/embed-assign / averagely/rocketmq-go | 0.55x | 0.45-0.70x | ≤ 0.50x **missed** | 1 of 3 |",
		"| averagely/native / averagely/rocketmq-go | 0.20x | 0.20-0.40x |  |  |",
		"| averagely/wasm / averagely/native | 1.50x | 1.00-3.00x | ≤ 2.00x | 2 of 3 |",
		"| averagely/wasm | 3 | 8 µs | 6 µs-12 µs |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if len(missed) != 1 || !strings.HasPrefix(missed[0], "averagely/embed-assign / averagely/rocketmq-go 0.55x") {
		t.Errorf("missed = %q, want only embed-assign's 0.55x", missed)
	}
	if strings.Contains(table, "circle/") || strings.Contains(table, "hash/") {
		t.Errorf("ratios of rows that did not run are shown:\n%s", table)
	}
}

func TestRatiosMedianOfAnEvenCount(t *testing.T) {
	rs := read(t, round(4000, 6000, 8000)+round(4000, 10000, 8000))
	table, missed, err := report(rs, goals)
	if err != nil {
		t.Fatal(err)
	}
	// 0.3 and 0.5: the median is their mean, 0.4, and 0.5 itself is within the goal.
	if want := "| averagely/wasm / averagely/rocketmq-go | 0.40x | 0.30-0.50x | ≤ 0.50x | 2 of 2 |"; !strings.Contains(table, want) {
		t.Errorf("table lacks %q:\n%s", want, table)
	}
	if len(missed) != 0 {
		t.Errorf("missed = %q, want none", missed)
	}
}

func TestRatiosRefuseARoundWithoutItsPartner(t *testing.T) {
	two := round(4000, 6000, 8000) + round(4000, 6000, 8000)
	// A third round whose wasm row failed to print: its times would pair with another round's.
	var lost []string
	for _, l := range strings.Split(round(4000, 6000, 8000), "\n") {
		if !strings.Contains(l, "averagely/wasm-2") {
			lost = append(lost, l)
		}
	}
	_, _, err := report(read(t, two+strings.Join(lost, "\n")), goals)
	if err == nil || !strings.Contains(err.Error(), "averagely/wasm ran 2 times and averagely/rocketmq-go 3") {
		t.Fatalf("err = %v, want averagely/wasm's two rounds against the client's three named", err)
	}
	if _, _, err := report(read(t, "PASS\n"), goals); err == nil {
		t.Fatal("no results at all gave no error")
	}
}

func TestRatiosNameAMalformedLine(t *testing.T) {
	rs := &rows{times: map[string][]float64{}, cpus: map[string]bool{}}
	err := rs.read(strings.NewReader("BenchmarkPeers/averagely/wasm-2 5000 fast ns/op\n"), "bad.txt")
	if err == nil || !strings.Contains(err.Error(), "bad.txt:1") {
		t.Fatalf("err = %v, want the file and line named", err)
	}
}
