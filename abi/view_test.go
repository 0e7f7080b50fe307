package abi_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/allocd/allocd/abi"
)

func mustParse(t *testing.T, r *abi.Request) *abi.View {
	t.Helper()
	b, err := abi.EncodeRequest(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	v, err := abi.ParseRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestViewTargetIndex(t *testing.T) {
	v := mustParse(t, &abi.Request{
		Group:     "g",
		Queues:    queues("T", "b", 2),
		Consumers: []string{"c1", "c2", "c2", "c3"},
		// "g" and "T" are in the string table too, but not as consumers.
		Targets: []string{"c2", "c9", "c3", "c1", "g", "T", ""},
	})
	if v.WholeGroup() || v.NumTargets() != 7 {
		t.Fatalf("WholeGroup %v, NumTargets %d", v.WholeGroup(), v.NumTargets())
	}
	for i, want := range []int{1, -1, 3, 0, -1, -1, -1} {
		if got := v.TargetIndex(i); got != want {
			t.Errorf("TargetIndex(%d) for %q = %d, want %d", i, v.Target(i), got, want)
		}
	}

	whole := mustParse(t, &abi.Request{Group: "g", Consumers: []string{"c1", "c1", "c2"}})
	if !whole.WholeGroup() || whole.NumTargets() != 3 {
		t.Fatalf("WholeGroup %v, NumTargets %d", whole.WholeGroup(), whole.NumTargets())
	}
	for i, want := range []int{0, 0, 2} { // the first occurrence, as RocketMQ's indexOf
		if got := whole.TargetIndex(i); got != want || whole.Target(i) != whole.Consumer(i) {
			t.Errorf("TargetIndex(%d) = %d, want %d", i, got, want)
		}
	}

	empty := mustParse(t, &abi.Request{Targets: []string{}})
	if empty.WholeGroup() || empty.NumTargets() != 0 {
		t.Errorf("an empty target list is not the whole group: WholeGroup %v, NumTargets %d", empty.WholeGroup(), empty.NumTargets())
	}
}

func TestViewConfig(t *testing.T) {
	v := mustParse(t, &abi.Request{Config: map[string]string{"vnodes": "10", "a": "1", "": "empty key", "z": "", "mode": "fast"}})
	for _, c := range []struct {
		key, want string
		ok        bool
	}{
		{"vnodes", "10", true}, {"a", "1", true}, {"", "empty key", true}, {"z", "", true}, {"mode", "fast", true},
		{"vnode", "", false}, {"vnodes2", "", false}, {"A", "", false}, {"zz", "", false},
	} {
		if got, ok := v.Config(c.key); got != c.want || ok != c.ok {
			t.Errorf("Config(%q) = %q, %v; want %q, %v", c.key, got, ok, c.want, c.ok)
		}
	}
	if _, ok := mustParse(t, &abi.Request{}).Config("vnodes"); ok {
		t.Errorf("Config found a key in a request without config")
	}
}

func TestViewAttrs(t *testing.T) {
	v := mustParse(t, &abi.Request{
		Queues: queues("T", "b", 3),
		QueueAttrs: []abi.Attrs{
			{Labels: map[string]string{"zone": "a", "rack": "r1"}, Metrics: map[string]int64{"lag": 5}},
			{},
			{Labels: map[string]string{"zone": ""}, Metrics: map[string]int64{"lag": -7, "size": 1 << 40}},
		},
		Consumers:     []string{"c1", "c2"},
		ConsumerAttrs: []abi.Attrs{{}, {Labels: map[string]string{"zone": "b"}, Metrics: map[string]int64{"weight": 3}}},
	})
	if !v.HasQueueAttrs() || !v.HasConsumerAttrs() {
		t.Fatalf("HasQueueAttrs %v, HasConsumerAttrs %v", v.HasQueueAttrs(), v.HasConsumerAttrs())
	}
	labels := []struct {
		i         int
		key, want string
		ok        bool
	}{
		{0, "zone", "a", true}, {0, "rack", "r1", true}, {0, "lag", "", false},
		{1, "zone", "", false}, {2, "zone", "", true}, {2, "rack", "", false},
	}
	for _, c := range labels {
		if got, ok := v.QueueLabel(c.i, c.key); got != c.want || ok != c.ok {
			t.Errorf("QueueLabel(%d, %q) = %q, %v; want %q, %v", c.i, c.key, got, ok, c.want, c.ok)
		}
	}
	metrics := []struct {
		i    int
		key  string
		want int64
		ok   bool
	}{
		{0, "lag", 5, true}, {0, "size", 0, false}, {1, "lag", 0, false}, {2, "lag", -7, true}, {2, "size", 1 << 40, true},
	}
	for _, c := range metrics {
		if got, ok := v.QueueMetric(c.i, c.key); got != c.want || ok != c.ok {
			t.Errorf("QueueMetric(%d, %q) = %d, %v; want %d, %v", c.i, c.key, got, ok, c.want, c.ok)
		}
	}
	if _, ok := v.ConsumerLabel(0, "zone"); ok {
		t.Errorf("consumer 0 has no labels")
	}
	if got, ok := v.ConsumerLabel(1, "zone"); got != "b" || !ok {
		t.Errorf("ConsumerLabel(1, zone) = %q, %v", got, ok)
	}
	if got, ok := v.ConsumerMetric(1, "weight"); got != 3 || !ok {
		t.Errorf("ConsumerMetric(1, weight) = %d, %v", got, ok)
	}
	if _, ok := v.ConsumerMetric(0, "weight"); ok {
		t.Errorf("consumer 0 has no metrics")
	}

	bare := mustParse(t, &abi.Request{Queues: queues("T", "b", 1), Consumers: []string{"c"}})
	if bare.HasQueueAttrs() || bare.HasConsumerAttrs() {
		t.Errorf("a request without attributes claims some")
	}
	if _, ok := bare.QueueLabel(0, "zone"); ok {
		t.Errorf("QueueLabel found a label in a request without attributes")
	}
	if _, ok := bare.ConsumerMetric(0, "weight"); ok {
		t.Errorf("ConsumerMetric found a metric in a request without attributes")
	}
}

func TestViewPrevOwner(t *testing.T) {
	v := mustParse(t, &abi.Request{Queues: queues("T", "b", 3), Consumers: []string{"c1"}, PrevOwners: []string{"c1", "", "gone"}})
	for i, want := range []struct {
		owner string
		ok    bool
	}{{"c1", true}, {"", false}, {"gone", true}} {
		if got, ok := v.PrevOwner(i); got != want.owner || ok != want.ok {
			t.Errorf("PrevOwner(%d) = %q, %v; want %q, %v", i, got, ok, want.owner, want.ok)
		}
	}
	if _, ok := mustParse(t, &abi.Request{Queues: queues("T", "b", 1)}).PrevOwner(0); ok {
		t.Errorf("PrevOwner found an owner in a request without previous owners")
	}
}

func TestViewBasics(t *testing.T) {
	v := mustParse(t, &abi.Request{Group: "grp", Queues: []abi.Queue{q("T", "b", 7), q("U", "c", -1)}, Consumers: []string{"x"}})
	if v.Group() != "grp" || v.NumQueues() != 2 || v.Queue(1) != q("U", "c", -1) || v.Consumer(0) != "x" || v.Minor() != abi.Minor {
		t.Errorf("view reads %q %d %v %q %d", v.Group(), v.NumQueues(), v.Queue(1), v.Consumer(0), v.Minor())
	}
	later, err := abi.ParseRequest(readBin(t, "req-unknown-section"))
	if err != nil {
		t.Fatal(err)
	}
	if later.Minor() != 1 || later.NumQueues() != 2 {
		t.Errorf("a v1.1 request reads as minor %d with %d queues", later.Minor(), later.NumQueues())
	}
}

// DecodeRequest copies its input: the request does not change when the bytes do.
func TestDecodeRequestCopies(t *testing.T) {
	b, _ := abi.EncodeRequest(nil, &abi.Request{Group: "g", Consumers: []string{"c1"}})
	r, err := abi.DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	clear(b)
	if r.Group != "g" || r.Consumers[0] != "c1" {
		t.Errorf("decoded request changed with its input: %+v", r)
	}
}

// queueRecord returns the bytes of queue record i of an encoded request, found through the
// directory.
func queueRecord(t *testing.T, b []byte, i int) []byte {
	t.Helper()
	n := int(binary.LittleEndian.Uint32(b[12:]))
	for e := 0; e < n; e++ {
		d := b[16+12*e:]
		if binary.LittleEndian.Uint32(d) == abi.SectionQueues {
			off := int(binary.LittleEndian.Uint32(d[4:]))
			return b[off+4+12*i : off+4+12*i+12]
		}
	}
	t.Fatal("no queues section")
	return nil
}

// TestViewBadQueueRecord: a queue record naming a string the request lacks is caught when it is
// read: the names read as empty, Err names the record, and DecodeRequest refuses the request.
func TestViewBadQueueRecord(t *testing.T) {
	b, err := abi.EncodeRequest(nil, &abi.Request{Group: "g", Queues: queues("T", "b", 3), Consumers: []string{"c1"}})
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(queueRecord(t, b, 1)[4:], 99) // broker name: string 99 of 4
	v, err := abi.ParseRequest(b)
	if err != nil {
		t.Fatalf("ParseRequest checks queue records as they are read, not up front: %v", err)
	}
	if v.NumQueues() != 3 || v.Err() != nil {
		t.Fatalf("NumQueues %d, Err %v before any queue was read", v.NumQueues(), v.Err())
	}
	if q := v.Queue(0); q.Topic != "T" || v.Err() != nil {
		t.Fatalf("a good record: %+v, Err %v", q, v.Err())
	}
	if q := v.Queue(1); q != (abi.Queue{QueueID: 1}) {
		t.Errorf("a bad record reads as %+v, want empty names", q)
	}
	if err := v.Err(); err == nil || !strings.Contains(err.Error(), "queue 1 names topic string 1 and broker string 99 of a 4-string table") {
		t.Errorf("Err = %v", err)
	}
	if _, err := abi.DecodeRequest(b); err == nil || !strings.Contains(err.Error(), "queue 1") {
		t.Errorf("DecodeRequest = %v, want the bad record named", err)
	}
	// Parsing again forgets the error.
	good, _ := abi.EncodeRequest(nil, &abi.Request{Group: "g", Queues: queues("T", "b", 3), Consumers: []string{"c1"}})
	if err := v.Parse(good); err != nil || v.Err() != nil || v.Queue(1).BrokerName != "b" {
		t.Errorf("after Parse of a good request: %v, Err %v", err, v.Err())
	}
}

// TestViewQueueRun: runs of mqAll by (topic, broker), their queue ids in order, and a bad record
// as a run of its own with empty names that Err reports.
func TestViewQueueRun(t *testing.T) {
	qs := append(append(queues("T", "a", 3), queues("T", "b", 2)...), queues("U", "a", 1)...)
	v := mustParse(t, &abi.Request{Group: "g", Queues: qs, Consumers: []string{"c"}})
	type run struct {
		topic, broker string
		end           int
		ids           []int32
	}
	var got []run
	for i := 0; i < v.NumQueues(); {
		topic, broker, end, ids := v.QueueRun(i, nil)
		got = append(got, run{topic, broker, end, ids})
		i = end
	}
	want := []run{{"T", "a", 3, []int32{0, 1, 2}}, {"T", "b", 5, []int32{0, 1}}, {"U", "a", 6, []int32{0}}}
	if fmt.Sprint(got) != fmt.Sprint(want) || v.Err() != nil {
		t.Errorf("runs %v (Err %v), want %v", got, v.Err(), want)
	}
	b, err := abi.EncodeRequest(nil, &abi.Request{Group: "g", Queues: queues("T", "b", 3), Consumers: []string{"c1"}})
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(queueRecord(t, b, 1)[4:], 99)
	v, err = abi.ParseRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if topic, _, end, ids := v.QueueRun(0, nil); topic != "T" || end != 1 || len(ids) != 1 {
		t.Errorf("run before the bad record: %q to %d, %v", topic, end, ids)
	}
	if topic, broker, end, ids := v.QueueRun(1, nil); topic != "" || broker != "" || end != 2 || !slices.Equal(ids, []int32{1}) || v.Err() == nil {
		t.Errorf("bad record: %q %q to %d, %v, Err %v", topic, broker, end, ids, v.Err())
	}
}

// TestViewQueueRunRandom: on random mqAll lists (runs of one to hundreds of queues, names that
// repeat in later runs, any queue id), QueueRun's runs, appended after what the caller's slice
// holds, give back every queue's names and id as Queue reads them, and each run ends where the
// names change.
func TestViewQueueRunRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	names := []string{"T", "U", "broker-a", "broker-b", "b"}
	for it := range 300 {
		var qs []abi.Queue
		for range r.IntN(6) {
			topic, broker := names[r.IntN(len(names))], names[r.IntN(len(names))]
			for range 1 + r.IntN([]int{3, 40, 400}[r.IntN(3)]) {
				qs = append(qs, abi.Queue{Topic: topic, BrokerName: broker, QueueID: int32(r.Uint32())})
			}
		}
		v := mustParse(t, &abi.Request{Group: "g", Queues: qs, Consumers: []string{"c"}})
		ids := []int32{-5, -6}[:r.IntN(3)] // what the caller's slice already holds stays
		for i := 0; i < v.NumQueues(); {
			prefix := slices.Clone(ids)
			topic, broker, end, got := v.QueueRun(i, ids)
			if end <= i || end > len(qs) || len(got) != len(prefix)+end-i || !slices.Equal(got[:len(prefix)], prefix) {
				t.Fatalf("iteration %d: run from %d ends at %d with %d ids after %d", it, i, end, len(got), len(prefix))
			}
			for k := i; k < end; k++ {
				if q := qs[k]; q.Topic != topic || q.BrokerName != broker || q.QueueID != got[len(prefix)+k-i] {
					t.Fatalf("iteration %d: queue %d is %v, the run from %d says %q %q %d", it, k, q, i, topic, broker, got[len(prefix)+k-i])
				}
			}
			if end < len(qs) && qs[end].Topic == topic && qs[end].BrokerName == broker {
				t.Fatalf("iteration %d: the run from %d ends at %d before a queue of the same names", it, i, end)
			}
			ids, i = got[:len(prefix)], end
		}
		if v.Err() != nil {
			t.Fatal(v.Err())
		}
	}
}

// TestViewSameConsumers: SameConsumers (in the guest, sameids_wasm.s) agrees with comparing
// Consumers' ids on random groups (ids of 0 to 40 bytes, some repeated, some named like the group
// or a broker) against the same ids; each id changed in one byte (its first, its last, one in
// between), made a byte longer or shorter, or swapped with the next; and one id more or fewer.
func TestViewSameConsumers(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	id := func() string {
		if r.IntN(8) == 0 {
			return []string{"g", "broker-a", ""}[r.IntN(3)]
		}
		b := make([]byte, r.IntN(41))
		for i := range b {
			b[i] = byte('a' + r.IntN(3))
		}
		return string(b)
	}
	for it := range 300 {
		var cids []string
		for range r.IntN(12) {
			cids = append(cids, id())
		}
		if len(cids) > 1 && r.IntN(4) == 0 {
			cids[r.IntN(len(cids))] = cids[0]
		}
		v := mustParse(t, &abi.Request{Group: "g", Queues: queues("T", "broker-a", 2), Consumers: cids})
		check := func(ids []string, what string) {
			t.Helper()
			if got, want := v.SameConsumers(ids), slices.Equal(v.Consumers(nil), ids); got != want {
				t.Fatalf("iteration %d, cidAll %q, %s %q: SameConsumers %v, want %v", it, cids, what, ids, got, want)
			}
		}
		check(slices.Clone(cids), "the same")
		check(append(slices.Clone(cids), "x"), "one more")
		if len(cids) == 0 {
			continue
		}
		check(cids[:len(cids)-1], "one fewer")
		for i, c := range cids {
			ids := slices.Clone(cids)
			if len(c) > 0 {
				for _, at := range []int{0, len(c) - 1, r.IntN(len(c))} {
					b := []byte(c)
					b[at] ^= 0x20
					ids[i] = string(b)
					check(ids, fmt.Sprintf("id %d changed at byte %d", i, at))
				}
				ids[i] = c[:len(c)-1]
				check(ids, fmt.Sprintf("id %d shorter", i))
			}
			ids[i] = c + "a"
			check(ids, fmt.Sprintf("id %d longer", i))
			if i+1 < len(cids) {
				ids[i], ids[i+1] = cids[i+1], c
				check(ids, fmt.Sprintf("ids %d and %d swapped", i, i+1))
			}
		}
	}
}

// TestViewConsumerChecks: HasEmptyConsumer and DistinctConsumers on ids in the writer's order,
// out of it (a consumer named like the group), repeated, and empty.
func TestViewConsumerChecks(t *testing.T) {
	for _, c := range []struct {
		consumers       []string
		empty, distinct bool
	}{
		{[]string{"a", "b", "c"}, false, true},
		{[]string{"a", "b", "g"}, false, true}, // "g" is the group: an earlier id
		{[]string{"a", "a", "b"}, false, false},
		{[]string{"b", "a", "b"}, false, false},
		{[]string{"", "a"}, true, true},
		{[]string{"a", "", ""}, true, false},
		{nil, false, true},
	} {
		v := mustParse(t, &abi.Request{Group: "g", Queues: queues("T", "b", 1), Consumers: c.consumers})
		if v.HasEmptyConsumer() != c.empty || v.DistinctConsumers() != c.distinct {
			t.Errorf("%q: empty %v distinct %v, want %v %v", c.consumers, v.HasEmptyConsumer(), v.DistinctConsumers(), c.empty, c.distinct)
		}
	}
}

// TestViewConsumerChecksLong: the same checks on lists long enough for the eight-at-a-time loops,
// with the empty id and the repeat at every position, against their definitions.
func TestViewConsumerChecksLong(t *testing.T) {
	for n := range 20 {
		for at := -1; at < n; at++ {
			for _, repeat := range []bool{false, true} {
				cs := make([]string, n)
				for i := range cs {
					cs[i] = fmt.Sprintf("c%02d", i)
				}
				if at >= 0 && repeat && at > 0 {
					cs[at] = cs[at-1]
				} else if at >= 0 && !repeat {
					cs[at] = ""
				}
				for _, group := range []string{"g", ""} { // an empty group: the table has an empty string
					v := mustParse(t, &abi.Request{Group: group, Queues: queues("T", "b", 1), Consumers: cs})
					empty, distinct := slices.Contains(cs, ""), len(slices.Compact(slices.Clone(cs))) == len(cs)
					if v.HasEmptyConsumer() != empty || v.DistinctConsumers() != distinct {
						t.Errorf("group %q, %q: empty %v distinct %v, want %v %v", group, cs, v.HasEmptyConsumer(), v.DistinctConsumers(), empty, distinct)
					}
				}
			}
		}
	}
}

// TestParseRefusesBadStringOffsets: a string table whose offsets decrease anywhere, or whose
// last offset passes the table's end, is refused with the string it names.
func TestParseRefusesBadStringOffsets(t *testing.T) {
	r := &abi.Request{Group: "g", Queues: queues("T", "b", 1)}
	for i := range 20 { // past two of the eight-offset iterations
		r.Consumers = append(r.Consumers, fmt.Sprintf("consumer-%d", i))
	}
	b, err := abi.EncodeRequest(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	sec := int(rd32(b[dirOf(t, b, abi.SectionStrings)+4:]))
	n := int(rd32(b[sec:]))
	offs := sec + 4
	for k := 1; k <= n; k++ {
		bad := slices.Clone(b)
		le32(bad[offs+4*k:], rd32(b[offs+4*(k-1):])-1) // below the offset before it
		if k == 1 {
			le32(bad[offs+4*k:], 0xffffffff)
		}
		if _, err := abi.ParseRequest(bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("string %d ends", k-1)) {
			t.Errorf("offset %d decreased: %v", k, err)
		}
	}
	bad := slices.Clone(b)
	le32(bad[offs+4*n:], uint32(len(b))) // past the table's end
	if _, err := abi.ParseRequest(bad); err == nil {
		t.Error("a last offset past the table's end was accepted")
	}
	if _, err := abi.ParseRequest(b); err != nil {
		t.Fatal(err)
	}
}

// Consumers reads every id as Consumer does, appended after what dst holds, and detaches the
// string table once (DetachStrings): a later Consumer detaches nothing again, and the ids it gave
// survive the request's bytes being overwritten.
func TestViewConsumers(t *testing.T) {
	ids := []string{"c1", "", "a-much-longer-consumer-id@10.0.0.1", "c1"}
	b, err := abi.EncodeRequest(nil, &abi.Request{Group: "g", Queues: queues("T", "b", 2), Consumers: ids})
	if err != nil {
		t.Fatal(err)
	}
	v, err := abi.ParseRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	stores := 0
	v.DetachStrings(func(table []byte) []byte { stores++; return slices.Clone(table) })
	got := v.Consumers([]string{"kept"})
	if want := append([]string{"kept"}, ids...); !slices.Equal(got, want) {
		t.Fatalf("Consumers = %q, want %q", got, want)
	}
	if v.Consumer(2) != ids[2] || stores != 1 {
		t.Fatalf("Consumer(2) = %q after Consumers, %d stores (want 1)", v.Consumer(2), stores)
	}
	clear(b)
	if !slices.Equal(got[1:], ids) {
		t.Fatalf("after the request's bytes were overwritten: %q", got[1:])
	}
	if got := mustParse(t, &abi.Request{Group: "g"}).Consumers(nil); len(got) != 0 {
		t.Fatalf("no consumers read as %q", got)
	}
}
