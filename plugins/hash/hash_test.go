package hash

import (
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/allocd/allocd/plugins/rocketmq"
)

const vectorsPath = "../../testdata/rocketmq-java-vectors-small.jsonl"

// javaAllocate is the whole Java call: constructor check, argument check, ring, filter.
func javaAllocate(cid string, mqAll []rocketmq.Queue, cidAll []string, vnodes int) ([]int, error) {
	if _, err := NewRing(0, nil, vnodes); err != nil { // the constructor throws before allocate runs
		return nil, err
	}
	if err := rocketmq.Check(cid, len(mqAll), len(cidAll)); err != nil {
		return nil, err
	}
	consumer := func(i int) string { return cidAll[i] }
	self := rocketmq.IndexOf(cid, len(cidAll), consumer)
	if self < 0 {
		return []int{}, nil
	}
	r, err := NewRing(len(cidAll), consumer, vnodes)
	if err != nil {
		return nil, err
	}
	owners := make([]int, len(mqAll))
	r.Assign(owners, len(mqAll), func(i int) (string, string, int32) {
		q := mqAll[i]
		return q.Topic, q.BrokerName, q.QueueID
	})
	return Queues([]int{}, owners, self), nil
}

// refHash is Java's MD5Hash.hash, written independently of Hash.
func refHash(key string) uint32 {
	d := md5.Sum([]byte(key))
	var h int64
	for i := 0; i < 4; i++ {
		h <<= 8
		h |= int64(d[i]) & 0xFF
	}
	return uint32(h)
}

// refAllocate transliterates Java's AllocateMessageQueueConsistentHash + ConsistentHashRouter with
// a string-valued "TreeMap", getExistingReplicas scanning the ring, and routeNode's tailMap lookup.
func refAllocate(cid string, mqAll []rocketmq.Queue, cidAll []string, vnodes int) ([]int, error) {
	if vnodes < 0 {
		return nil, errors.New("illegal virtualNodeCnt :" + strconv.Itoa(vnodes))
	}
	if err := rocketmq.Check(cid, len(mqAll), len(cidAll)); err != nil {
		return nil, err
	}
	if !slices.Contains(cidAll, cid) {
		return []int{}, nil
	}
	ring := map[uint32]string{}
	for _, node := range cidAll {
		existing := 0
		for _, v := range ring {
			if v == node {
				existing++
			}
		}
		for i := 0; i < vnodes; i++ {
			ring[refHash(node+"-"+strconv.Itoa(i+existing))] = node
		}
	}
	keys := make([]uint32, 0, len(ring))
	for k := range ring {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	result := []int{}
	for qi, mq := range mqAll {
		if len(keys) == 0 {
			continue
		}
		h := refHash(fmt.Sprintf("MessageQueue [topic=%s, brokerName=%s, queueId=%d]", mq.Topic, mq.BrokerName, mq.QueueID))
		j := sort.Search(len(keys), func(j int) bool { return keys[j] >= h })
		if j == len(keys) {
			j = 0
		}
		if ring[keys[j]] == cid {
			result = append(result, qi)
		}
	}
	return result, nil
}

func vectorVnodes(t *testing.T, v *rocketmq.Vector) (int, error) {
	t.Helper()
	if v.VnodesDefault {
		if v.Vnodes != DefaultVirtualNodes {
			t.Errorf("line %d: vnodesDefault with vnodes=%d", v.Line, v.Vnodes)
		}
		return ParseVirtualNodes("")
	}
	return ParseVirtualNodes(strconv.Itoa(v.Vnodes))
}

func TestJavaVectors(t *testing.T) {
	vs, err := rocketmq.LoadVectors(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for i := range vs {
		v := &vs[i]
		if v.Strategy != "CONSISTENT_HASH" {
			continue
		}
		count++
		vnodes, err := vectorVnodes(t, v)
		var got []int
		if err == nil {
			got, err = javaAllocate(v.CID, v.MQAll, v.CIDAll, vnodes)
		}
		ref, refErr := refAllocate(v.CID, v.MQAll, v.CIDAll, v.Vnodes)
		if want := v.WantError(); want != "" {
			if err == nil || err.Error() != want {
				t.Errorf("line %d (%s): err = %v, want %q", v.Line, v.Family, err, want)
			}
			if refErr == nil || refErr.Error() != want {
				t.Errorf("line %d (%s): reference err = %v, want %q", v.Line, v.Family, refErr, want)
			}
			continue
		}
		if err != nil || refErr != nil || !v.HasResult {
			t.Errorf("line %d (%s): err = %v, reference err = %v, hasResult = %v", v.Line, v.Family, err, refErr, v.HasResult)
			continue
		}
		if !slices.Equal(got, v.Result) {
			t.Errorf("line %d (%s): V=%d cid %q of %d, n=%d: got %v, want %v",
				v.Line, v.Family, vnodes, v.CID, len(v.CIDAll), len(v.MQAll), got, v.Result)
		}
		if !slices.Equal(ref, v.Result) {
			t.Errorf("line %d (%s): reference got %v, want %v", v.Line, v.Family, ref, v.Result)
		}
	}
	if count == 0 {
		t.Fatal("no CONSISTENT_HASH vectors")
	}
	t.Logf("%d CONSISTENT_HASH vectors", count)
}

// TestJavaVectorsWholeGroup checks the one-pass use: one ring and one Assign per scenario and
// configuration give every member of the group its vector's result.
func TestJavaVectorsWholeGroup(t *testing.T) { eachHashing(t, javaVectorsWholeGroup) }

func javaVectorsWholeGroup(t *testing.T) {
	vs, err := rocketmq.LoadVectors(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		scenario, vnodes int
		def              bool
	}
	owners := map[key][]int{}
	checked := 0
	for i := range vs {
		v := &vs[i]
		if v.Strategy != "CONSISTENT_HASH" || !v.HasResult {
			continue
		}
		k := key{v.Scenario, v.Vnodes, v.VnodesDefault}
		o, ok := owners[k]
		if !ok {
			vnodes, err := vectorVnodes(t, v)
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewRing(len(v.CIDAll), v.Consumer, vnodes)
			if err != nil {
				t.Fatal(err)
			}
			o = make([]int, len(v.MQAll))
			r.Assign(o, len(v.MQAll), v.Queue)
			owners[k] = o
			// The owner form's int32 owners are the same.
			o32 := make([]int32, len(v.MQAll))
			r.AssignOwners(o32, v.Queue)
			for j := range o {
				if int(o32[j]) != o[j] {
					t.Fatalf("line %d: AssignOwners gives queue %d owner %d, Assign %d", v.Line, j, o32[j], o[j])
				}
			}
		}
		if len(o) != len(v.MQAll) {
			t.Fatalf("line %d: scenario %d mixes mqAll sizes", v.Line, v.Scenario)
		}
		self := rocketmq.IndexOf(v.CID, len(v.CIDAll), v.Consumer)
		if got := Queues([]int{}, o, self); !slices.Equal(got, v.Result) {
			t.Errorf("line %d: got %v, want %v", v.Line, got, v.Result)
		}
		checked++
	}
	t.Logf("%d rings for %d results", len(owners), checked)
}

func TestHashExamples(t *testing.T) {
	tests := []struct {
		key  string
		want uint32
	}{
		{"10.0.3.7@12345-0", 1811655797},
		{"10.0.3.7@12345-0", 0x6bfbac75},
		{"MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=0]", 1987926524},
		{"10.0.35445@DEFAULT-0", 0xb13483fa},
		{"10.0.65797@DEFAULT-0", 0xb13483fa},
		{"host-110811@DEFAULT-0", 0x9b93337f},
		{"host-23910@DEFAULT-0", 0x9b93337f},
		{"10.1.1.1@20544-0", 0xc055493b},
		{"MessageQueue [topic=TopicHit624, brokerName=broker-a, queueId=1]", 0xc055493b},
	}
	for _, tt := range tests {
		if got := Hash([]byte(tt.key)); got != tt.want {
			t.Errorf("Hash(%q) = %d (%#x), want %d (%#x)", tt.key, got, got, tt.want, tt.want)
		}
		if got := refHash(tt.key); got != tt.want {
			t.Errorf("refHash(%q) = %d, want %d", tt.key, got, tt.want)
		}
	}
}

func TestParseVirtualNodes(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr string // "" means no error; "*" means any error naming the value
	}{
		{"", DefaultVirtualNodes, ""},
		{"0", 0, ""},
		{"1", 1, ""},
		{"10", 10, ""},
		{"+50", 50, ""},
		{"007", 7, ""},
		{"2147483647", 2147483647, ""},
		{"-1", 0, "illegal virtualNodeCnt :-1"},
		{"-03", 0, "illegal virtualNodeCnt :-3"},
		{"abc", 0, "*"},
		{"1.5", 0, "*"},
		{" 3", 0, "*"},
		{"3 ", 0, "*"},
		{"0x10", 0, "*"},
		{"2147483648", 0, "*"},
	}
	for _, tt := range tests {
		got, err := ParseVirtualNodes(tt.in)
		switch tt.wantErr {
		case "":
			if err != nil || got != tt.want {
				t.Errorf("ParseVirtualNodes(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		case "*":
			if err == nil || !containsQuoted(err.Error(), tt.in) {
				t.Errorf("ParseVirtualNodes(%q) = %d, %v; want an error naming the value", tt.in, got, err)
			}
		default:
			var ae *rocketmq.ArgumentError
			if err == nil || err.Error() != tt.wantErr || !errors.As(err, &ae) {
				t.Errorf("ParseVirtualNodes(%q) = %d, %v; want *ArgumentError %q", tt.in, got, err, tt.wantErr)
			}
		}
	}
}

func containsQuoted(msg, value string) bool {
	q := strconv.Quote(value)
	for i := 0; i+len(q) <= len(msg); i++ {
		if msg[i:i+len(q)] == q {
			return true
		}
	}
	return false
}

func TestNewRingNegativeVnodes(t *testing.T) {
	_, err := NewRing(2, func(i int) string { return "a" }, -5)
	var ae *rocketmq.ArgumentError
	if !errors.As(err, &ae) || err.Error() != "illegal virtualNodeCnt :-5" {
		t.Fatalf("err = %v, want illegal virtualNodeCnt :-5", err)
	}
}

func TestNewRingTooLarge(t *testing.T) {
	if _, err := NewRing(1<<20, func(i int) string { return "a" }, 1<<12); err == nil {
		t.Fatal("2^32 ring entries accepted")
	}
}

func TestVnodesZeroGivesNobodyAnything(t *testing.T) {
	ids := []string{"a@1", "b@1", "c@1"}
	r, err := NewRing(len(ids), func(i int) string { return ids[i] }, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 0 {
		t.Fatalf("Len = %d", r.Len())
	}
	owners := []int{7, 7, 7, 7}
	r.Assign(owners, 4, func(i int) (string, string, int32) { return "T", "b", int32(i) })
	if !slices.Equal(owners, []int{-1, -1, -1, -1}) {
		t.Fatalf("owners = %v", owners)
	}
	for self := range ids {
		if got := Queues(nil, owners, self); len(got) != 0 {
			t.Errorf("consumer %d got %v", self, got)
		}
	}
	var zero Ring
	if o := zero.Owner("T", "b", 0); o != -1 {
		t.Errorf("zero Ring Owner = %d", o)
	}
}

// entries returns the ring as hash -> owner index.
func entries(r *Ring) map[uint32]int {
	m := make(map[uint32]int, r.Len())
	for i, h := range r.hashes {
		m[h] = int(r.nodes[i])
	}
	return m
}

func hashes(keys ...string) []uint32 {
	out := make([]uint32, len(keys))
	for i, k := range keys {
		out[i] = Hash([]byte(k))
	}
	return out
}

func newRing(t *testing.T, ids []string, vnodes int) *Ring {
	t.Helper()
	r, err := NewRing(len(ids), func(i int) string { return ids[i] }, vnodes)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(r.hashes) || len(r.hashes) != len(r.nodes) {
		t.Fatal("ring not sorted")
	}
	return r
}

func wantRing(t *testing.T, r *Ring, want map[string]int) {
	t.Helper()
	got := entries(r)
	if len(got) != len(want) {
		t.Errorf("ring has %d entries, want %d", len(got), len(want))
	}
	for key, owner := range want {
		if o, ok := got[Hash([]byte(key))]; !ok || o != owner {
			t.Errorf("entry %q: owner %d (present %v), want %d", key, o, ok, owner)
		}
	}
}

func TestDuplicateCIDDoublesWeight(t *testing.T) {
	r := newRing(t, []string{"a@1", "a@1", "b@1"}, 3)
	wantRing(t, r, map[string]int{
		"a@1-0": 0, "a@1-1": 0, "a@1-2": 0, "a@1-3": 0, "a@1-4": 0, "a@1-5": 0,
		"b@1-0": 2, "b@1-1": 2, "b@1-2": 2,
	})
	// Unsorted duplicates: the owner is the first index of the id.
	r = newRing(t, []string{"b@1", "a@1", "b@1", "a@1", "a@1"}, 2)
	wantRing(t, r, map[string]int{
		"b@1-0": 0, "b@1-1": 0, "b@1-2": 0, "b@1-3": 0,
		"a@1-0": 1, "a@1-1": 1, "a@1-2": 1, "a@1-3": 1, "a@1-4": 1, "a@1-5": 1,
	})
}

func TestCollisionLaterPutWins(t *testing.T) {
	for _, pair := range [][2]string{
		{"10.0.35445@DEFAULT", "10.0.65797@DEFAULT"},
		{"host-110811@DEFAULT", "host-23910@DEFAULT"},
		{"n11593", "n38145"},
	} {
		for _, ids := range [][]string{{pair[0], pair[1]}, {pair[1], pair[0]}} {
			r := newRing(t, ids, 1)
			wantRing(t, r, map[string]int{ids[1] + "-0": 1})
			owners := make([]int, 50)
			r.Assign(owners, len(owners), func(i int) (string, string, int32) { return "TopicTest", "broker-a", int32(i) })
			if got := Queues(nil, owners, 0); len(got) != 0 {
				t.Errorf("%v V=1: loser %q got %v", ids, ids[0], got)
			}
			if got := Queues(nil, owners, 1); len(got) != len(owners) {
				t.Errorf("%v V=1: winner %q got %d queues", ids, ids[1], len(got))
			}
			// With V=2 the loser keeps its "-1" point.
			wantRing(t, newRing(t, ids, 2), map[string]int{ids[0] + "-1": 0, ids[1] + "-0": 1, ids[1] + "-1": 1})
		}
	}
}

// e counts the ring entries that survived, not the vnodes put: after "n38145-0" is overwritten by
// "n11593-0", the second copy of n38145 starts again at index 0 (and takes the point back).
func TestDuplicateCountsSurvivors(t *testing.T) {
	if h := hashes("n11593-0", "n38145-0"); h[0] != h[1] {
		t.Fatal("collision pair broken")
	}
	wantRing(t, newRing(t, []string{"n38145", "n11593", "n38145"}, 1), map[string]int{"n38145-0": 0})

	// "n1954-1" overwrites "n64734-0"; the second n64734 has e=1 and puts "-1" (again) and "-2".
	if h := hashes("n1954-1", "n64734-0"); h[0] != h[1] {
		t.Fatal("collision pair broken")
	}
	wantRing(t, newRing(t, []string{"n64734", "n1954", "n64734"}, 2), map[string]int{
		"n64734-1": 0, "n64734-2": 0, "n1954-0": 1, "n1954-1": 1,
	})
}

func TestInclusiveLookup(t *testing.T) {
	for _, ids := range [][]string{
		{"10.0.3.7@12345", "10.1.1.1@20544"},
		{"10.1.1.1@20544", "10.0.3.7@12345"},
		{"10.1.1.1@20544", "10.1.1.1@20545", "10.1.1.1@20546", "10.1.1.2@20544"},
	} {
		for _, v := range []int{1, 3, 10} {
			r := newRing(t, ids, v)
			want := slices.Index(ids, "10.1.1.1@20544")
			if got := r.Owner("TopicHit624", "broker-a", 1); got != want {
				t.Errorf("%v V=%d: owner %d, want %d", ids, v, got, want)
			}
		}
	}
}

func TestWrapAround(t *testing.T) {
	r := newRing(t, []string{"a@1", "b@1", "c@1"}, 2)
	// A queue whose hash exceeds every ring hash goes to the smallest ring entry.
	for q := int32(0); q < 2000; q++ {
		h := Hash(fmt.Appendf(nil, "MessageQueue [topic=T, brokerName=b, queueId=%d]", q))
		if h <= r.hashes[len(r.hashes)-1] {
			continue
		}
		if got := r.Owner("T", "b", q); got != int(r.nodes[0]) {
			t.Fatalf("queue %d: owner %d, want %d", q, got, r.nodes[0])
		}
		return
	}
	t.Skip("no queue hashed past the ring's last entry")
}

// collisionIDs have "-k" keys that collide with each other (found by search; see the hashes in
// TestDuplicateCountsSurvivors and TestHashExamples).
var collisionIDs = []string{
	"n11593", "n38145", "n1954", "n64734", "n11157", "n27079", "n68139", "n69251",
	"n5459", "n78076", "n3767", "n47118", "n13568", "n48388",
	"10.0.35445@DEFAULT", "10.0.65797@DEFAULT", "host-110811@DEFAULT", "host-23910@DEFAULT",
	"10.1.1.1@20544",
}

func TestCollisionIDs(t *testing.T) {
	for _, p := range [][2]string{
		{"n11157-1", "n27079-2"}, {"n68139-1", "n69251-1"}, {"n5459-0", "n78076-1"},
		{"n3767-0", "n47118-0"}, {"n13568-2", "n48388-1"},
	} {
		if h := hashes(p[0], p[1]); h[0] != h[1] {
			t.Errorf("%q and %q do not collide", p[0], p[1])
		}
	}
}

// TestAgainstReference compares javaAllocate with the straight transliteration of Java on random
// groups: repeated and unsorted ids, colliding ids, V from 0, odd queue ids.
func TestAgainstReference(t *testing.T) { eachHashing(t, againstReference) }

func againstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := append([]string{"a@1", "b@1", "A@1", " ", "10.0.3.7@12345", "x"}, collisionIDs...)
	iters := 1500
	if testing.Short() {
		iters = 200
	}
	for it := 0; it < iters; it++ {
		c := 1 + rng.IntN(10)
		cidAll := make([]string, c)
		for i := range cidAll {
			cidAll[i] = pool[rng.IntN(len(pool))]
		}
		if rng.IntN(2) == 0 {
			slices.Sort(cidAll)
			if rng.IntN(2) == 0 {
				cidAll = slices.Compact(cidAll)
			}
		}
		vnodes := []int{0, 1, 1, 2, 3, 4, 10}[rng.IntN(7)]
		n := 1 + rng.IntN(40)
		mqAll := make([]rocketmq.Queue, n)
		for i := range mqAll {
			mqAll[i] = rocketmq.Queue{
				// with names long enough that the key's prefix fills one or two MD5 blocks
				Topic:      []string{"TopicTest", "T", "TopicHit624", "payments.settlement.events-v2"}[rng.IntN(4)],
				BrokerName: []string{"broker-a", "broker-b", "b", "rmq-broker-zone-east-1a-000000000000000042"}[rng.IntN(4)],
				QueueID:    []int32{0, 1, -1, 7, 2147483647, -2147483648, int32(rng.IntN(300))}[rng.IntN(7)],
			}
		}
		for _, cid := range append(slices.Clone(cidAll), "not-a-member") {
			got, err := javaAllocate(cid, mqAll, cidAll, vnodes)
			want, wantErr := refAllocate(cid, mqAll, cidAll, vnodes)
			if err != nil || wantErr != nil || !slices.Equal(got, want) {
				t.Fatalf("cidAll=%q V=%d cid=%q mqAll=%v:\n got %v, %v\nwant %v, %v",
					cidAll, vnodes, cid, mqAll, got, err, want, wantErr)
			}
		}
	}
}

// The fast path (distinct ids) and the exact simulation build the same ring.
func TestFastPathMatchesSimulation(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for it := 0; it < 300; it++ {
		ids := slices.Clone(collisionIDs)
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		ids = ids[:1+rng.IntN(len(ids))]
		v := 1 + rng.IntN(4)
		var fast, exact Ring
		_, ascending := distinctIDs(ids)
		fast.buildDistinct(ids, ascending, v)
		exact.buildRepeated(ids, v)
		if !slices.Equal(fast.hashes, exact.hashes) || !slices.Equal(fast.nodes, exact.nodes) {
			t.Fatalf("ids %q V=%d: fast %v/%v, exact %v/%v", ids, v, fast.hashes, fast.nodes, exact.hashes, exact.nodes)
		}
	}
}

// With V >= 1 every queue has exactly one owner, which is a first index of its id.
func TestEveryQueueOwned(t *testing.T) {
	ids := []string{"c@1", "a@1", "c@1", "b@1", "a@1"}
	first := map[int]bool{0: true, 1: true, 3: true}
	r := newRing(t, ids, 1)
	owners := make([]int, 500)
	r.Assign(owners, len(owners), func(i int) (string, string, int32) { return "TopicTest", "broker-0", int32(i) })
	total := 0
	for self := range ids {
		total += len(Queues(nil, owners, self))
	}
	if total != len(owners) {
		t.Fatalf("%d queues assigned, want %d", total, len(owners))
	}
	for q, o := range owners {
		if !first[o] {
			t.Fatalf("queue %d owned by %d, not a first index", q, o)
		}
	}
}

func TestOwnerDoesNotAllocate(t *testing.T) {
	ids, queue := benchGroup()
	r, err := NewRing(len(ids), func(i int) string { return ids[i] }, DefaultVirtualNodes)
	if err != nil {
		t.Fatal(err)
	}
	owners := make([]int, 1024)
	r.Assign(owners, len(owners), queue) // grows the scratch buffer
	if a := testing.AllocsPerRun(20, func() { r.Assign(owners, len(owners), queue) }); a != 0 {
		t.Errorf("Assign: %v allocations", a)
	}
	if a := testing.AllocsPerRun(100, func() { r.Owner("TopicTest", "broker-3", 255) }); a != 0 {
		t.Errorf("Owner: %v allocations", a)
	}
}

// benchGroup is the benchmark group: 64 consumers "10.0.0.<i>@<pid>" (sorted, as RebalanceImpl
// sorts them) and 1024 queues of TopicTest, brokers broker-0..broker-3 x 256 queues.
func benchGroup() ([]string, func(int) (string, string, int32)) {
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = fmt.Sprintf("10.0.0.%d@%d", i, 20000+i)
	}
	slices.Sort(ids)
	brokers := []string{"broker-0", "broker-1", "broker-2", "broker-3"}
	return ids, func(i int) (string, string, int32) { return "TopicTest", brokers[i/256], int32(i % 256) }
}

// BenchmarkWholeGroup computes every consumer's list for 1024 queues and 64 consumers, V=10:
// build the ring, one Assign pass, bucket by owner.
func BenchmarkWholeGroup(b *testing.B) {
	ids, queue := benchGroup()
	consumer := func(i int) string { return ids[i] }
	owners := make([]int, 1024)
	lists := make([][]int, len(ids))
	b.ReportAllocs()
	for b.Loop() {
		r, err := NewRing(len(ids), consumer, DefaultVirtualNodes)
		if err != nil {
			b.Fatal(err)
		}
		r.Assign(owners, len(owners), queue)
		for i := range lists {
			lists[i] = lists[i][:0]
		}
		for q, o := range owners {
			if o >= 0 {
				lists[o] = append(lists[o], q)
			}
		}
	}
}

func BenchmarkNewRing(b *testing.B) {
	ids, _ := benchGroup()
	consumer := func(i int) string { return ids[i] }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewRing(len(ids), consumer, DefaultVirtualNodes); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewRingRepeated is NewRing on the exact-simulation path (one id repeated).
func BenchmarkNewRingRepeated(b *testing.B) {
	ids, _ := benchGroup()
	ids[len(ids)-1] = ids[0]
	consumer := func(i int) string { return ids[i] }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewRing(len(ids), consumer, DefaultVirtualNodes); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAssign(b *testing.B) {
	ids, queue := benchGroup()
	r, err := NewRing(len(ids), func(i int) string { return ids[i] }, DefaultVirtualNodes)
	if err != nil {
		b.Fatal(err)
	}
	owners := make([]int, 1024)
	b.ReportAllocs()
	for b.Loop() {
		r.Assign(owners, len(owners), queue)
	}
}

// TestSortKeys: the radix sort of large rings orders keys exactly as a comparison sort does,
// equal hashes by consumer index included.
func TestSortKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 255, 256, 257, 1000, 5000} {
		keys := make([]uint64, n)
		for i := range keys {
			h := rng.Uint32()
			if i > 0 && rng.IntN(4) == 0 {
				h = uint32(keys[rng.IntN(i)] >> 32) // a collision with an earlier key
			}
			keys[i] = uint64(h)<<32 | uint64(i)
		}
		want := slices.Clone(keys)
		slices.Sort(want)
		if got := sortKeys(keys); !slices.Equal(got, want) {
			t.Fatalf("n=%d: radix order differs from a comparison sort", n)
		}
	}
}

// TestAgainstReferenceLargeRings is TestAgainstReference on rings of 256 entries and more, where
// NewRing radix-sorts and lookups search a bucket index, with ids that collide among them.
func TestAgainstReferenceLargeRings(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	iters := 60
	if testing.Short() {
		iters = 10
	}
	for it := 0; it < iters; it++ {
		c := 26 + rng.IntN(60)
		cidAll := make([]string, 0, c+len(collisionIDs))
		for i := range c {
			cidAll = append(cidAll, fmt.Sprintf("10.0.%d.%d@%d", rng.IntN(4), i, 1000+rng.IntN(9000)))
		}
		cidAll = append(cidAll, collisionIDs...)
		if rng.IntN(2) == 0 {
			slices.Sort(cidAll)
		}
		vnodes := 10 + rng.IntN(11)
		n := 1 + rng.IntN(300)
		mqAll := make([]rocketmq.Queue, n)
		for i := range mqAll {
			mqAll[i] = rocketmq.Queue{Topic: "TopicTest", BrokerName: fmt.Sprintf("broker-%d", i%4), QueueID: int32(i / 4)}
		}
		for _, cid := range []string{cidAll[0], cidAll[rng.IntN(len(cidAll))], cidAll[len(cidAll)-1], "not-a-member"} {
			got, err := javaAllocate(cid, mqAll, cidAll, vnodes)
			want, wantErr := refAllocate(cid, mqAll, cidAll, vnodes)
			if err != nil || wantErr != nil || !slices.Equal(got, want) {
				t.Fatalf("%d consumers, V=%d, cid=%q, %d queues:\n got %v, %v\nwant %v, %v", len(cidAll), vnodes, cid, n, got, err, want, wantErr)
			}
		}
	}
}

// TestMemoGivesNewRingsAnswers: over a sequence of requests (the same one again, a member
// joining and leaving, a broker added, queue ids past the memo's bound and negative ones, another
// vnodes, another group's members, members known and new interleaved, members not in order), a
// ring built with a Memo assigns every queue as a ring built from scratch does, and the Memo
// keeps only the last request's consumers (none for members not in order) and brokers.
func TestMemoGivesNewRingsAnswers(t *testing.T) { eachHashing(t, memoGivesNewRingsAnswers) }

func memoGivesNewRingsAnswers(t *testing.T) {
	type req struct {
		cids    []string
		brokers []string
		ids     []int32
		vnodes  int
	}
	ids := func(from, to int32) (out []int32) {
		for i := from; i < to; i++ {
			out = append(out, i)
		}
		return out
	}
	cids := func(n int) (out []string) {
		for i := range n {
			out = append(out, fmt.Sprintf("10.0.0.%d@%d", i, 100+i))
		}
		return out
	}
	// every other one of cids(12) and other ids between them, ascending
	interleaved := func() (out []string) {
		for i, id := range slices.Sorted(slices.Values(cids(12))) {
			if i%2 == 0 {
				out = append(out, id)
			}
			out = append(out, id+"-other")
		}
		return out
	}
	reversed := func(ids []string) []string { ids = slices.Clone(ids); slices.Reverse(ids); return ids }
	seq := []req{
		{cids(8), []string{"b0", "b1"}, ids(0, 64), 10},
		{cids(8), []string{"b0", "b1"}, ids(0, 64), 10},
		{cids(9), []string{"b0", "b1"}, ids(0, 64), 10},
		{cids(9), []string{"b1", "b0"}, ids(0, 64), 10}, // the brokers in the other order
		{cids(9), []string{"b1", "b0"}, ids(0, 64), 10},
		{cids(7), []string{"b0", "b1", "b2"}, ids(0, 64), 10},
		{cids(7), []string{"b2"}, append(ids(-3, 5), maxMemoQueueID-1, maxMemoQueueID, 1<<30), 10},
		{cids(7), []string{"b2"}, append(ids(-3, 5), maxMemoQueueID-1, maxMemoQueueID, 1<<30), 10},
		{cids(7), []string{"b0"}, ids(0, 64), 3},
		{cids(3), []string{"b0"}, ids(0, 64), 0},
		{cids(7), []string{"b0"}, ids(0, 64), 3},
		{reversed(cids(7)), []string{"b0"}, ids(0, 64), 3},
		{cids(7), []string{"b0"}, ids(0, 64), 3},
		{cids(7), []string{"b0"}, ids(0, 100), 3}, // 64 hashes known, 36 to hash
		{cids(7), []string{"b0"}, ids(0, 100), 3},
		{slices.Sorted(slices.Values(cids(12))), []string{"b0"}, ids(0, 64), 3},
		{interleaved(), []string{"b0"}, ids(0, 64), 3},
		{slices.Sorted(slices.Values(cids(12)))[5:], []string{"b0"}, ids(0, 64), 3},
		{[]string{"other-1", "other-2"}, []string{"b0"}, ids(0, 64), 3},
	}
	var m Memo
	var last *Ring
	for step, r := range seq {
		type q struct {
			b  string
			id int32
		}
		var mq []q
		for _, b := range r.brokers {
			for _, id := range r.ids {
				mq = append(mq, q{b, id})
			}
		}
		queue := func(i int) (string, string, int32) { return "T", mq[i].b, mq[i].id }
		consumer := func(i int) string { return r.cids[i] }
		fresh, err := NewRing(len(r.cids), consumer, r.vnodes)
		if err != nil {
			t.Fatal(err)
		}
		var memo *Ring
		switch kept := m.RingIDs(); {
		case step%2 == 0 && kept != nil && slices.Equal(kept, r.cids):
			// The memo's own ids, as the guest passes them back when abi.View.SameConsumers
			// finds the request's are those: the ring again without a comparison, or a new
			// one when vnodes changed.
			memo, err = NewRingMemoIDs(kept, r.vnodes, &m)
		case step%3 == 1:
			// The ids in a slice, each at an address of its own: the memo compares their bytes.
			ids := make([]string, len(r.cids))
			for i, id := range r.cids {
				ids[i] = strings.Clone(id)
			}
			memo, err = NewRingMemoIDs(ids, r.vnodes, &m)
		default:
			memo, err = NewRingMemo(len(r.cids), consumer, r.vnodes, &m)
		}
		if err != nil {
			t.Fatal(err)
		}
		// The same members (equal ids, vnodes) as the step before get the same ring back.
		same := step > 0 && slices.Equal(r.cids, seq[step-1].cids) && r.vnodes == seq[step-1].vnodes && r.vnodes > 0
		if (memo == last) != same {
			t.Errorf("step %d: ring reused %v, want %v", step, memo == last, same)
		}
		last = memo
		want, got := make([]int32, len(mq)), make([]int32, len(mq))
		fresh.AssignOwners(want, queue)
		if step%2 == 0 {
			memo.AssignOwners(got, queue)
		} else {
			memo.AssignOwnerRuns(got, func(i int, ids []int32) (string, string, int, []int32) {
				end := i
				for end < len(mq) && mq[end].b == mq[i].b {
					ids = append(ids, mq[end].id)
					end++
				}
				return "T", mq[i].b, end, ids
			})
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: with the memo %v, from scratch %v", step, got, want)
		}
		kept := len(r.cids)
		if !slices.IsSorted(r.cids) {
			kept = 0
		}
		if r.vnodes > 0 && (len(m.hashIDs) != kept || len(m.hashes) != kept*r.vnodes || len(m.runs) != len(r.brokers)) {
			t.Fatalf("step %d: memo holds %d consumers (%d hashes) and %d brokers, want %d and %d", step, len(m.hashIDs), len(m.hashes), len(m.runs), kept, len(r.brokers))
		}
		// The next request's order is this one's brokers, each the run the map holds.
		if r.vnodes > 0 {
			if len(m.order) != len(r.brokers) {
				t.Fatalf("step %d: the memo's order has %d runs for %d brokers", step, len(m.order), len(r.brokers))
			}
			for i, b := range r.brokers {
				if run := m.order[i]; run.key != [2]string{"T", b} || m.runs[run.key] != run {
					t.Fatalf("step %d: the memo's order names %q at %d, not the map's run for %q", step, run.key, i, b)
				}
			}
		}
	}
}

// TestMemoTakesKnownMembersHashes: a request whose members ascend takes the hashes of the members
// the request before had from the Memo, and hashes only the others: a ring built after the
// Memo's hashes were replaced by marks holds the marks for the known members and true hashes for
// the new ones.
func TestMemoTakesKnownMembersHashes(t *testing.T) {
	const v = 3
	before := []string{"a", "c", "d", "f", "h"}
	after := []string{"b", "c", "e", "f", "g", "h", "i"} // c, f and h known
	var m Memo
	if _, err := NewRingMemo(len(before), func(i int) string { return before[i] }, v, &m); err != nil {
		t.Fatal(err)
	}
	marks := map[string][]uint32{}
	for i, id := range m.hashIDs {
		for k := range v {
			m.hashes[i*v+k] = uint32(1000*i + k + 1) // far from every true hash here
			marks[id] = append(marks[id], m.hashes[i*v+k])
		}
	}
	r, err := NewRingMemo(len(after), func(i int) string { return after[i] }, v, &m)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range after {
		want := marks[id]
		if want == nil {
			var fresh Ring
			fresh.scratch = make([]byte, 0, 96)
			want = fresh.appendVnodeHashes(nil, id, v)
		}
		var got []uint32
		for j, n := range r.nodes {
			if int(n) == i {
				got = append(got, r.hashes[j])
			}
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("member %s: ring entries %v, want %v", id, got, want)
		}
	}
}

// BenchmarkWholeGroupMemo is the 1,024 x 64 group's ring and owners from scratch, with a Memo on
// the same request again, and with a Memo while a 65th consumer joins and leaves by turns (a
// rebalance as the daemon asks for one).
func BenchmarkWholeGroupMemo(b *testing.B) {
	var cids [2][]string
	for i := range 65 {
		cids[1] = append(cids[1], fmt.Sprintf("10.0.0.%d@%d", i+1, 4000+i))
	}
	cids[0] = cids[1][:64]
	slices.Sort(cids[1])
	brokers := []string{"broker-0", "broker-1", "broker-2", "broker-3"}
	queue := func(i int) (string, string, int32) { return "TopicTest", brokers[i/256], int32(i % 256) }
	owners := make([]int32, 1024)
	run := func(b *testing.B, m *Memo, turns int) {
		i := 0
		for b.Loop() {
			ids := cids[i%turns]
			r, err := buildRing(len(ids), func(j int) string { return ids[j] }, DefaultVirtualNodes, m)
			if err != nil {
				b.Fatal(err)
			}
			r.AssignOwners(owners, queue)
			i++
		}
	}
	b.Run("fresh", func(b *testing.B) { run(b, nil, 1) })
	b.Run("memo-same", func(b *testing.B) { run(b, &Memo{}, 1) })
	b.Run("memo-rebalance", func(b *testing.B) { run(b, &Memo{}, 2) })
}

// BenchmarkPrefixMD5 is prefixMD5 over the 1,024 queue keys of a broker of the whole-group
// benchmark, two blocks each: as a wasip1 test binary, the guest's MD5 (BENCHMARKS.md).
func BenchmarkPrefixMD5(b *testing.B) {
	var p prefixMD5
	p.reset([]byte("MessageQueue [topic=TopicTest, brokerName=broker-0, queueId="))
	var sum uint32
	for b.Loop() {
		for id := range uint32(1024) {
			sum += p.sum(id, ']')
		}
	}
	md5Sink = sum
}

var md5Sink uint32

// md5Prefix, Hash's MD5 in the wasm guest, is crypto/md5's first 4 bytes for every length around
// the block and padding boundaries (55/56, 63/64, 119/120 bytes) and for RocketMQ's keys.
func TestMD5Prefix(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for n := range 300 {
		for range 8 {
			key := make([]byte, n)
			for i := range key {
				key[i] = byte(r.Uint32())
			}
			sum := md5.Sum(key)
			if got, want := md5Prefix(key), binary.BigEndian.Uint32(sum[:4]); got != want {
				t.Fatalf("md5Prefix of %d bytes %x = %#x, crypto/md5 %#x", n, key, got, want)
			}
		}
	}
	for _, key := range []string{"", "10.0.3.7@12345-0", "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=1023]"} {
		if got, want := md5Prefix([]byte(key)), refHash(key); got != want {
			t.Errorf("md5Prefix(%q) = %d, Java's MD5Hash %d", key, got, want)
		}
	}
}

func FuzzMD5Prefix(f *testing.F) {
	f.Add([]byte("10.0.3.7@12345-0"))
	f.Add(make([]byte, 56))
	f.Fuzz(func(t *testing.T, key []byte) {
		sum := md5.Sum(key)
		if got, want := md5Prefix(key), binary.BigEndian.Uint32(sum[:4]); got != want {
			t.Fatalf("md5Prefix(%x) = %#x, crypto/md5 %#x", key, got, want)
		}
	})
}

// eachHashing runs test natively as it is and again with the Ring hashing its keys as a wasm
// guest does (prefixHashing: prefixMD5 instead of crypto/md5 over each key).
func eachHashing(t *testing.T, test func(*testing.T)) {
	t.Run("crypto-md5", test)
	t.Run("prefix-md5", func(t *testing.T) {
		defer func(was bool) { prefixHashing = was }(prefixHashing)
		prefixHashing = true
		test(t)
	})
}

// prefixMD5's hashes, one key at a time (sum) and many in one call (sums), are crypto/md5's of
// the whole key for every prefix length around the block and padding boundaries, every digit
// count and both endings, and its buffer is back to zeros after each key (the next key's padding
// depends on it).
func TestPrefixMD5(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	values := []uint32{0, 7, 1023, 65535, math.MaxUint32, math.MaxUint32 - 1}
	for p := uint64(10); p <= 1e9; p *= 10 {
		values = append(values, uint32(p-1), uint32(p), uint32(p+1))
	}
	var p prefixMD5
	for n := range 200 {
		prefix := make([]byte, n)
		for i := range prefix {
			prefix[i] = byte(r.Uint32())
		}
		p.reset(prefix)
		vs := append(slices.Clip(values), r.Uint32(), r.Uint32()%1000)
		for _, closing := range []byte{0, ']'} {
			want := make([]uint32, len(vs))
			for k, v := range vs {
				key := strconv.AppendUint(slices.Clip(prefix), uint64(v), 10)
				if closing != 0 {
					key = append(key, closing)
				}
				sum := md5.Sum(key)
				want[k] = binary.BigEndian.Uint32(sum[:4])
				if got := p.sum(v, closing); got != want[k] {
					t.Fatalf("sum: prefix of %d bytes, %d, closing %q: %#x, crypto/md5 %#x", n, v, closing, got, want[k])
				}
				checkCleared(t, &p, "sum")
			}
			got := make([]uint32, len(vs)+1)
			got[len(vs)] = 1
			p.sums(got, vs, closing)
			if got[len(vs)] != 1 {
				t.Fatalf("sums: prefix of %d bytes: wrote past its %d values", n, len(vs))
			}
			for k, v := range vs {
				if got[k] != want[k] {
					t.Fatalf("sums: prefix of %d bytes, %d, closing %q: %#x, crypto/md5 %#x", n, v, closing, got[k], want[k])
				}
			}
			checkCleared(t, &p, "sums")
		}
	}
}

// checkCleared fails unless p's buffer is zero past the prefix.
func checkCleared(t *testing.T, p *prefixMD5, by string) {
	t.Helper()
	if rest := p.buf[p.n:]; slices.ContainsFunc(rest, func(b byte) bool { return b != 0 }) {
		t.Fatalf("%s: prefix of %d bytes: buffer not cleared past the prefix: %x", by, p.done+p.n, rest)
	}
}

func FuzzPrefixMD5(f *testing.F) {
	f.Add([]byte("MessageQueue [topic=TopicTest, brokerName=broker-a, queueId="), uint32(1023), true)
	f.Add([]byte("10.0.3.7@12345-"), uint32(0), false)
	f.Fuzz(func(t *testing.T, prefix []byte, v uint32, closed bool) {
		var p prefixMD5
		p.reset(prefix)
		key := strconv.AppendUint(slices.Clip(prefix), uint64(v), 10)
		closing := byte(0)
		if closed {
			closing = ']'
			key = append(key, closing)
		}
		sum := md5.Sum(key)
		want := binary.BigEndian.Uint32(sum[:4])
		for range 2 { // the second from the buffer the first left
			if got := p.sum(v, closing); got != want {
				t.Fatalf("sum: prefix %x, %d, closing %q: %#x, crypto/md5 %#x", prefix, v, closing, got, want)
			}
		}
		var got [2]uint32
		p.sums(got[:], []uint32{v, v}, closing)
		if got != [2]uint32{want, want} {
			t.Fatalf("sums: prefix %x, %d, closing %q: %#x, crypto/md5 %#x twice", prefix, v, closing, got, want)
		}
		checkCleared(t, &p, "sums")
	})
}

// putDecimal writes what strconv does, around every change of digit count.
func TestPutDecimal(t *testing.T) {
	vs := []uint32{math.MaxUint32, math.MaxUint32 - 1}
	for v := range uint32(12000) {
		vs = append(vs, v)
	}
	for p := uint32(10); p <= 1e9; p *= 10 {
		vs = append(vs, p-1, p, p+1)
	}
	for _, v := range vs {
		var b [10]byte
		n := putDecimal(b[:], v)
		if got, want := string(b[:n]), strconv.FormatUint(uint64(v), 10); got != want {
			t.Fatalf("putDecimal(%d) = %q, want %q", v, got, want)
		}
	}
}

// ringLookups (in the guest, lookups_wasm.s) is lookup for every key: each ring hash, its
// neighbours, both ends of the hash space (past the last hash wraps to the first) and random
// ones, on rings of one entry to thousands (buckets of zero to several entries).
func TestRingLookups(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, shape := range []struct{ c, vnodes int }{{1, 1}, {1, 2}, {2, 3}, {3, 10}, {64, 10}, {100, 37}, {7, 1000}} {
		r, err := NewRing(shape.c, func(i int) string { return fmt.Sprintf("10.0.0.%d@%d", i, 4000+i) }, shape.vnodes)
		if err != nil {
			t.Fatal(err)
		}
		hs := []uint32{0, 1, math.MaxUint32, math.MaxUint32 - 1}
		for _, h := range r.hashes {
			hs = append(hs, h, h-1, h+1)
		}
		for range 1000 {
			hs = append(hs, rng.Uint32())
		}
		out := make([]int32, len(hs)+1)
		out[len(hs)] = -7
		ringLookups(r, hs, out)
		if out[len(hs)] != -7 {
			t.Fatalf("%d x %d: wrote past its %d keys", shape.c, shape.vnodes, len(hs))
		}
		for j, h := range hs {
			if want := int32(r.lookup(h)); out[j] != want {
				t.Fatalf("%d x %d, ring of %d: key %#x: %d, lookup %d", shape.c, shape.vnodes, r.Len(), h, out[j], want)
			}
		}
	}
}

// memoPut (in the guest, lookups_wasm.s) keeps each hash, 0 included, under its id when the id is
// an index of the table, skips the others (past the end, negative), and counts the entries that
// were unknown; a later hash of a repeated id wins.
func TestMemoPut(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, size := range []int{0, 1, 5, 64, 300} {
		known := make([]uint64, size)
		for i := range known {
			if rng.IntN(2) == 0 {
				known[i] = 1<<32 | uint64(rng.Uint32())
			}
		}
		want := slices.Clone(known)
		ids := []int32{-1, math.MinInt32, math.MaxInt32, int32(size), int32(size) - 1, 0}
		for range 500 {
			ids = append(ids, int32(rng.IntN(size+3))-1)
		}
		hs := make([]uint32, len(ids))
		for k := range hs {
			hs[k] = []uint32{0, rng.Uint32()}[rng.IntN(2)]
		}
		added := 0
		for k, id := range ids {
			if id >= 0 && int(id) < size {
				if want[id] == 0 {
					added++
				}
				want[id] = 1<<32 | uint64(hs[k])
			}
		}
		if got := memoPut(known, ids, hs); got != added || !slices.Equal(known, want) {
			t.Fatalf("size %d: %d added (want %d), table equal: %v", size, got, added, slices.Equal(known, want))
		}
	}
}

// sameStrings (in the guest, lookups_wasm.s) is slices.Equal: copies at other addresses compare
// equal at every length, and one byte changed anywhere (in a word, in the last eight bytes read
// again, in a string of under eight) or one length changed makes a difference, in any pair.
func TestSameStrings(t *testing.T) {
	var base []string
	for n := range 41 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + (n+i)%26)
		}
		base = append(base, string(b))
	}
	copies := func() []string {
		out := make([]string, len(base))
		for i, s := range base {
			out[i] = strings.Clone(s) // another address, the same bytes
		}
		return out
	}
	if !sameStrings(base, copies()) || !sameStrings(base, base) || !sameStrings(nil, []string{}) {
		t.Fatal("equal lists compared unequal")
	}
	if sameStrings(base, base[:len(base)-1]) || sameStrings(nil, []string{""}) {
		t.Fatal("lists of different lengths compared equal")
	}
	for k, s := range base {
		for p := range len(s) {
			other := copies()
			b := []byte(s)
			b[p] ^= 0x20
			other[k] = string(b)
			if sameStrings(base, other) || sameStrings(other, base) {
				t.Fatalf("string %d (%d bytes): byte %d changed, compared equal", k, len(s), p)
			}
		}
		other := copies()
		other[k] = s + "x"
		if sameStrings(base, other) {
			t.Fatalf("string %d (%d bytes): a byte longer, compared equal", k, len(s))
		}
	}
}

// NewRingMemoIDs refuses what NewRing refuses, with the same message, and gives an empty ring for
// no ids or no virtual nodes.
func TestNewRingMemoIDsChecksAsNewRing(t *testing.T) {
	var m Memo
	_, want := NewRing(2, func(int) string { return "a" }, -5)
	if _, err := NewRingMemoIDs([]string{"a", "b"}, -5, &m); err == nil || err.Error() != want.Error() {
		t.Fatalf("vnodes -5: err %v, want %v", err, want)
	}
	if _, err := NewRingMemoIDs(make([]string, 1<<20), 1<<12, &m); err == nil {
		t.Fatal("a ring of 2^32 entries was not refused")
	}
	for _, ids := range [][]string{nil, {"a", "b"}} {
		r, err := NewRingMemoIDs(ids, 0, &m)
		if err != nil || r.Len() != 0 || r.Owner("T", "b", 0) != -1 {
			t.Fatalf("%d ids, no virtual nodes: %v, %d entries", len(ids), err, r.Len())
		}
	}
}

// memoLookups (in the guest, lookups_wasm.s) gives each id whose hash the memo holds (a hash of 0
// included) its owner on the ring, as lookup does, and lists every other place in order (unknown
// entries, ids past the table's end, negative ids), leaving its out as it was.
func TestMemoLookups(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, shape := range []struct{ c, vnodes, size int }{{1, 1, 0}, {2, 3, 1}, {3, 10, 5}, {64, 10, 300}, {7, 1000, 64}} {
		r, err := NewRing(shape.c, func(i int) string { return fmt.Sprintf("10.0.0.%d@%d", i, 4000+i) }, shape.vnodes)
		if err != nil {
			t.Fatal(err)
		}
		// past the table's end, an entry that is not 0: an id there must still be a miss
		known := make([]uint64, shape.size+1)
		known[shape.size] = 1<<32 | 5
		known = known[:shape.size]
		for i := range known {
			switch rng.IntN(4) {
			case 0: // unknown
			case 1:
				known[i] = 1 << 32 // a known hash of 0
			case 2:
				known[i] = 1<<32 | uint64(r.hashes[rng.IntN(len(r.hashes))]+uint32(rng.IntN(3))-1) // at an entry
			default:
				known[i] = 1<<32 | uint64(rng.Uint32())
			}
		}
		ids := []int32{-1, math.MinInt32, math.MaxInt32, int32(shape.size), int32(shape.size) - 1, 0}
		for range 500 {
			ids = append(ids, int32(rng.IntN(shape.size+3))-1)
		}
		out := make([]int32, len(ids)+1)
		for k := range out {
			out[k] = -7
		}
		miss := make([]int32, len(ids)+1)
		miss[len(ids)] = -7
		n := memoLookups(r, known, ids, out, miss)
		if out[len(ids)] != -7 || miss[len(ids)] != -7 {
			t.Fatalf("%+v: wrote past its buffers", shape)
		}
		var want []int32
		for k, id := range ids {
			if id >= 0 && int(id) < shape.size && known[id] != 0 {
				if w := int32(r.lookup(uint32(known[id]))); out[k] != w {
					t.Fatalf("%+v: id %d (hash %#x): owner %d, lookup %d", shape, id, uint32(known[id]), out[k], w)
				}
				continue
			}
			if out[k] != -7 {
				t.Fatalf("%+v: id %d, unknown, had its owner written (%d)", shape, id, out[k])
			}
			want = append(want, int32(k))
		}
		if !slices.Equal(miss[:n], want) {
			t.Fatalf("%+v: misses %v, want %v", shape, miss[:n], want)
		}
	}
}
