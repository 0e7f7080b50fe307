package averagely

import (
	"fmt"
	"slices"
	"testing"

	"github.com/allocd/allocd/plugins/rocketmq"
)

const vectorsPath = "../../testdata/rocketmq-java-vectors-small.jsonl"

// javaAllocate is the whole Java call: check, indexOf, allocate.
func javaAllocate(cid string, n int, cidAll []string) ([]int, error) {
	if err := rocketmq.Check(cid, n, len(cidAll)); err != nil {
		return nil, err
	}
	self := rocketmq.IndexOf(cid, len(cidAll), func(i int) string { return cidAll[i] })
	return Allocate([]int{}, n, len(cidAll), self), nil
}

func TestJavaVectors(t *testing.T) {
	vs, err := rocketmq.LoadVectors(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, v := range vs {
		if v.Strategy != "AVG" {
			continue
		}
		count++
		got, err := javaAllocate(v.CID, len(v.MQAll), v.CIDAll)
		if want := v.WantError(); want != "" {
			if err == nil || err.Error() != want {
				t.Errorf("line %d (%s): err = %v, want %q", v.Line, v.Family, err, want)
			}
			continue
		}
		if err != nil || !v.HasResult {
			t.Errorf("line %d (%s): err = %v, hasResult = %v", v.Line, v.Family, err, v.HasResult)
			continue
		}
		if !slices.Equal(got, v.Result) {
			t.Errorf("line %d (%s): cid %q of %d, n=%d: got %v, want %v",
				v.Line, v.Family, v.CID, len(v.CIDAll), len(v.MQAll), got, v.Result)
		}
	}
	if count == 0 {
		t.Fatal("no AVG vectors")
	}
	t.Logf("%d AVG vectors", count)
}

func TestSpecExamples(t *testing.T) {
	tests := []struct {
		n, c int
		want [][]int
	}{
		{10, 4, [][]int{{0, 1, 2}, {3, 4, 5}, {6, 7}, {8, 9}}},
		{4, 4, [][]int{{0}, {1}, {2}, {3}}},
		{2, 4, [][]int{{0}, {1}, {}, {}}},
		{1, 3, [][]int{{0}, {}, {}}},
		{8, 4, [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
		{5, 1, [][]int{{0, 1, 2, 3, 4}}},
		{7, 3, [][]int{{0, 1, 2}, {3, 4}, {5, 6}}},
	}
	for _, tt := range tests {
		for self, want := range tt.want {
			if got := Allocate(nil, tt.n, tt.c, self); !slices.Equal(got, want) {
				t.Errorf("n=%d c=%d self=%d: got %v, want %v", tt.n, tt.c, self, got, want)
			}
		}
	}
}

func TestNotAMemberAndBadArguments(t *testing.T) {
	for _, a := range [][3]int{{10, 4, -1}, {10, 4, 4}, {0, 4, 0}, {10, 0, 0}, {-1, 2, 0}} {
		if got := Allocate(nil, a[0], a[1], a[2]); len(got) != 0 {
			t.Errorf("Allocate(n=%d, c=%d, self=%d) = %v, want nothing", a[0], a[1], a[2], got)
		}
	}
	got, err := javaAllocate("z@1", 3, []string{"a@1", "b@1"})
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("cid not in cidAll: got %v, %v; want empty list, nil", got, err)
	}
}

func TestAppendsToDst(t *testing.T) {
	dst := []int{-7}
	if got := Allocate(dst, 10, 4, 1); !slices.Equal(got, []int{-7, 3, 4, 5}) {
		t.Errorf("got %v", got)
	}
}

// Unsorted input is used as given, and a repeated cid counts at its first index.
func TestInputUsedAsGiven(t *testing.T) {
	got, _ := javaAllocate("A", 4, []string{"B", "A"})
	if !slices.Equal(got, []int{2, 3}) {
		t.Errorf("unsorted [B A]: A got %v, want [2 3]", got)
	}
	cidAll := []string{"A", "A", "B"}
	for cid, want := range map[string][]int{"A": {0, 1}, "B": {4}} {
		if got, _ := javaAllocate(cid, 5, cidAll); !slices.Equal(got, want) {
			t.Errorf("duplicated A: %s got %v, want %v", cid, got, want)
		}
	}
}

// The blocks of consumers 0..c-1, concatenated, are exactly 0..n-1, and sizes follow the spec.
func TestBlocksTileMQAll(t *testing.T) {
	for n := 1; n <= 150; n++ {
		for c := 1; c <= 70; c++ {
			var all []int
			for self := 0; self < c; self++ {
				before := len(all)
				all = Allocate(all, n, c, self)
				size := len(all) - before
				want := n / c
				if self < n%c {
					want++
				}
				if size != want {
					t.Fatalf("n=%d c=%d self=%d: size %d, want %d", n, c, self, size, want)
				}
			}
			if len(all) != n {
				t.Fatalf("n=%d c=%d: %d queues assigned", n, c, len(all))
			}
			for i, q := range all {
				if q != i {
					t.Fatalf("n=%d c=%d: concatenation %v is not 0..n-1", n, c, all)
				}
			}
		}
	}
}

func TestNoAllocationWithCapacity(t *testing.T) {
	dst := make([]int, 0, 64)
	if a := testing.AllocsPerRun(100, func() { dst = Allocate(dst[:0], 1024, 64, 17) }); a != 0 {
		t.Errorf("%v allocations", a)
	}
}

// BenchmarkWholeGroup computes every consumer's list for 1024 queues (4 brokers x 256) and 64
// consumers.
func BenchmarkWholeGroup(b *testing.B) {
	const n, c = 4 * 256, 64
	lists := make([][]int, c)
	for i := range lists {
		lists[i] = make([]int, 0, n/c+1)
	}
	b.ReportAllocs()
	for b.Loop() {
		for self := range lists {
			lists[self] = Allocate(lists[self][:0], n, c, self)
		}
	}
}

// BenchmarkJavaStyleCalls is the same group computed as Java does it: one allocate call per
// consumer, each running the check and cidAll.indexOf.
func BenchmarkJavaStyleCalls(b *testing.B) {
	const n, c = 4 * 256, 64
	ids := make([]string, c)
	for i := range ids {
		ids[i] = fmt.Sprintf("10.0.0.%d@%d", i, 20000+i)
	}
	slices.Sort(ids)
	at := func(i int) string { return ids[i] }
	dst := make([]int, 0, n/c+1)
	b.ReportAllocs()
	for b.Loop() {
		for _, cid := range ids {
			if rocketmq.Check(cid, n, c) != nil {
				b.Fatal("check failed")
			}
			dst = Allocate(dst[:0], n, c, rocketmq.IndexOf(cid, c, at))
		}
	}
}

// TestOwnersIsAllocate: the whole-group form gives every queue to the consumer whose Allocate
// list holds it, and each list is that consumer's queues in mqAll order. The sizes cover blocks of
// fewer, exactly and more than 16 queues (Owners writes 16 entries at a time) and groups whose
// last blocks are written exactly; nothing past len(owners) is written.
func TestOwnersIsAllocate(t *testing.T) {
	check := func(n, c int) {
		t.Helper()
		const sentinel = -7
		backing := make([]int32, n+64)
		for i := range backing {
			backing[i] = sentinel
		}
		owners := backing[:n]
		Owners(owners, c)
		lists := make([][]int, c)
		for q, o := range owners {
			if o < 0 || int(o) >= c {
				t.Fatalf("n=%d c=%d: queue %d has owner %d", n, c, q, o)
			}
			lists[o] = append(lists[o], q)
		}
		for self := range c {
			if want := Allocate(nil, n, c, self); !slices.Equal(lists[self], want) {
				t.Fatalf("n=%d c=%d self=%d: owners give %v, Allocate %v", n, c, self, lists[self], want)
			}
		}
		for i, o := range backing[n:] {
			if o != sentinel {
				t.Fatalf("n=%d c=%d: entry %d past the end written (%d)", n, c, n+i, o)
			}
		}
	}
	for n := 0; n <= 300; n++ {
		for c := 1; c <= 70; c++ {
			check(n, c)
		}
	}
	for _, nc := range [][2]int{{1024, 64}, {1024, 1}, {1000, 7}, {4096, 255}, {100_000, 10_000}, {100_000, 3}} {
		check(nc[0], nc[1])
	}
	owners := []int32{5, 5}
	Owners(owners, 0)
	if owners[0] != -1 || owners[1] != -1 {
		t.Fatalf("no consumers: %v, want -1 everywhere", owners)
	}
}

// BenchmarkOwners is the whole-group form for 1024 queues and 64 consumers.
func BenchmarkOwners(b *testing.B) {
	owners := make([]int32, 1024)
	for b.Loop() {
		Owners(owners, 64)
	}
}
