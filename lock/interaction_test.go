package lock

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// epoch is t=0s in the transcripts; times are printed as offsets from it.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeDirectory is the daemon's side of the Table, driven by the transcript
// commands group, members, assign and prefer.
type fakeDirectory struct {
	groups  map[string]GroupConfig
	members map[string][]string
	owners  map[string]map[Queue]string
	prefs   map[string]map[MessageGroup]string
	// asked records the Prefer calls when record is set, so transcripts
	// can show that the plugin is consulted only under contention.
	record bool
	asked  []string
}

func newFakeDirectory() *fakeDirectory {
	return &fakeDirectory{
		groups:  make(map[string]GroupConfig),
		members: make(map[string][]string),
		owners:  make(map[string]map[Queue]string),
		prefs:   make(map[string]map[MessageGroup]string),
	}
}

func (d *fakeDirectory) Group(group string) (GroupConfig, bool) {
	c, ok := d.groups[group]
	return c, ok
}

func (d *fakeDirectory) Members(group string) []string { return d.members[group] }

func (d *fakeDirectory) Owner(group string, q Queue) string { return d.owners[group][q] }

func (d *fakeDirectory) Prefer(group string, g MessageGroup, live []string) string {
	p := d.prefs[group][g]
	if !d.record {
		return p
	}
	d.asked = append(d.asked, fmt.Sprintf("%s among %s -> %s", g, strings.Join(live, ","), cmpOrString(p, "no preference")))
	return p
}

func cmpOrString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// harness runs one transcript file.
type harness struct {
	dir   *fakeDirectory
	table *Table
	cfg   Config
	// written is the Version at the last persist command.
	written uint64
}

func newHarness(t testing.TB) *harness {
	h := &harness{dir: newFakeDirectory()}
	h.dir.record = true
	h.cfg = Config{Directory: h.dir, Preference: h.dir}
	tb, err := New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.table = tb
	return h
}

// TestInteraction replays the transcripts in testdata/*.txt. Each file is a
// story with a fresh Table; run with -rewrite to regenerate the expected
// output, then read the diff.
func TestInteraction(t *testing.T) {
	// Glob rather than datadriven.Walk: testdata/fuzz holds fuzz corpora.
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			h := newHarness(t)
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				return h.run(t, d)
			})
		})
	}
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "new":
		// Starts a fresh Table (keeping the directory) with non-default
		// configuration.
		h.cfg = Config{Directory: h.dir, Preference: h.dir}
		if d.HasArg("patience") {
			h.cfg.Patience = durArg(t, d, "patience")
		}
		if d.HasArg("idle-ttl") {
			h.cfg.IdleTTL = durArg(t, d, "idle-ttl")
		}
		tb, err := New(h.cfg)
		if err != nil {
			return "error: " + err.Error()
		}
		h.table = tb
		return "ok"

	case "group":
		cfg := GroupConfig{}
		var kind string
		d.ScanArgs(t, "kind", &kind)
		if err := cfg.Kind.UnmarshalText([]byte(kind)); err != nil {
			n, nerr := strconv.Atoi(kind)
			if nerr != nil {
				t.Fatalf("bad kind %q", kind)
			}
			cfg.Kind = Kind(n)
		}
		d.MaybeScanArgs(t, "max-attempts", &cfg.MaxAttempts)
		h.dir.groups[groupArg(t, d)] = cfg
		return "ok"

	case "members":
		var cids []string
		if arg, ok := d.Arg("cids"); ok {
			cids = arg.Vals
		}
		h.dir.members[groupArg(t, d)] = cids
		return "ok"

	case "assign":
		// Input lines "c1: T/b/0 T/b/1" replace the group's assignment.
		owners := make(map[Queue]string)
		for _, line := range nonEmptyLines(d.Input) {
			cid, qs, ok := strings.Cut(line, ":")
			if !ok {
				t.Fatalf("bad assign line %q", line)
			}
			for _, f := range strings.Fields(qs) {
				owners[parseQueue(t, f)] = strings.TrimSpace(cid)
			}
		}
		h.dir.owners[groupArg(t, d)] = owners
		return "ok"

	case "prefer":
		// Input lines "T/order-42: c1" set what the plugin prefers.
		prefs := make(map[MessageGroup]string)
		for _, line := range nonEmptyLines(d.Input) {
			mg, cid, ok := strings.Cut(line, ":")
			if !ok {
				t.Fatalf("bad prefer line %q", line)
			}
			prefs[parseMessageGroup(t, strings.TrimSpace(mg))] = strings.TrimSpace(cid)
		}
		h.dir.prefs[groupArg(t, d)] = prefs
		return "ok"

	case "plugin-calls":
		out := strings.Join(h.dir.asked, "\n")
		h.dir.asked = nil
		return cmpOrString(out, "none")

	case "lock-queues":
		now, group, cid := timeArg(t, d), groupArg(t, d), cidArg(t, d)
		locked, refused, err := h.table.LockQueues(now, group, cid, queuesArg(t, d), leaseArg(t, d))
		if err != nil {
			return "error: " + err.Error()
		}
		var b strings.Builder
		for _, g := range locked {
			b.WriteString(fmtGrant(g) + "\n")
		}
		for _, r := range refused {
			b.WriteString(fmtRefusal(r) + "\n")
		}
		return b.String()

	case "unlock-queues":
		now, group, cid := timeArg(t, d), groupArg(t, d), cidArg(t, d)
		unlocked, err := h.table.UnlockQueues(now, group, cid, queuesArg(t, d))
		if err != nil {
			return "error: " + err.Error()
		}
		if len(unlocked) == 0 {
			return "unlocked nothing"
		}
		var s []string
		for _, q := range unlocked {
			s = append(s, q.String())
		}
		return "unlocked " + strings.Join(s, " ")

	case "lock-mg":
		now, group, cid := timeArg(t, d), groupArg(t, d), cidArg(t, d)
		g, r, err := h.table.LockMessageGroup(now, group, cid, mgArg(t, d), leaseArg(t, d))
		switch {
		case err != nil:
			return "error: " + err.Error()
		case r != nil:
			return fmtRefusal(*r)
		}
		return fmtGrant(g)

	case "release-mg":
		now, group, cid := timeArg(t, d), groupArg(t, d), cidArg(t, d)
		var token uint64
		var outcome string
		d.ScanArgs(t, "token", &token)
		d.ScanArgs(t, "outcome", &outcome)
		var o Outcome
		if err := o.UnmarshalText([]byte(outcome)); err != nil {
			n, nerr := strconv.Atoi(outcome)
			if nerr != nil {
				t.Fatalf("bad outcome %q", outcome)
			}
			o = Outcome(n)
		}
		if err := h.table.ReleaseMessageGroup(now, group, cid, mgArg(t, d), token, o); err != nil {
			return "error: " + err.Error()
		}
		return "released"

	case "check":
		now, group := timeArg(t, d), groupArg(t, d)
		var token uint64
		d.ScanArgs(t, "token", &token)
		var l Lock
		switch {
		case d.HasArg("queue"):
			var q string
			d.ScanArgs(t, "queue", &q)
			l = QueueLock(parseQueue(t, q))
		case d.HasArg("mg"):
			l = MessageGroupLock(mgArg(t, d))
		default:
			var k int
			d.ScanArgs(t, "kind", &k)
			l = Lock{Kind: Kind(k)}
		}
		if err := h.table.Check(now, group, l, token); err != nil {
			return "error: " + err.Error()
		}
		return "valid"

	case "member-gone":
		now, group, cid := timeArg(t, d), groupArg(t, d), cidArg(t, d)
		// The daemon drops the member from its view and tells the Table.
		h.dir.members[group] = slices.DeleteFunc(slices.Clone(h.dir.members[group]), func(m string) bool { return m == cid })
		gone, err := h.table.MemberGone(now, group, cid)
		if err != nil {
			return "error: " + err.Error()
		}
		return fmtLeases("released", gone, "released nothing")

	case "tick":
		return fmtLeases("expired", h.table.Tick(timeArg(t, d)), "nothing expired")

	case "leases":
		var group string
		d.MaybeScanArgs(t, "group", &group)
		return fmtLeases("", h.table.Leases(timeArg(t, d), group), "no leases")

	case "persist":
		// What the daemon does before answering: write the snapshot if,
		// and only if, Version changed.
		if v := h.table.Version(); v != h.written {
			h.written = v
			return "snapshot written"
		}
		return "nothing to write"

	case "snapshot":
		b, err := json.MarshalIndent(h.table.Snapshot(), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)

	case "restart":
		// The daemon stops after persisting the Snapshot and starts a new
		// Table from it; refused asks, being soft state, are lost.
		b, err := json.Marshal(h.table.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		var s Snapshot
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		tb, err := New(h.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := tb.Restore(s); err != nil {
			return "error: " + err.Error()
		}
		h.table, h.written = tb, tb.Version()
		return fmt.Sprintf("restarted with %d locks, last token %d", len(s.Locks), s.LastToken)

	case "restore":
		// Restores the JSON snapshot in the input, to show what Restore refuses.
		var s Snapshot
		if err := json.Unmarshal([]byte(d.Input), &s); err != nil {
			return "error: " + err.Error()
		}
		if err := h.table.Restore(s); err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}

func fmtGrant(g Grant) string {
	verb := "granted"
	if g.Renewed {
		verb = "renewed"
	}
	s := fmt.Sprintf("%s %s token=%d", verb, g.Lock, g.Token)
	if g.Attempt > 0 {
		s += fmt.Sprintf(" attempt=%d", g.Attempt)
	}
	s += " expires=" + fmtTime(g.Expires)
	if g.DeadLetter {
		s += " dead-letter"
	}
	return s
}

func fmtRefusal(r Refusal) string {
	s := fmt.Sprintf("refused %s: %s", r.Lock, r.Reason)
	if r.Holder != "" {
		s += " holder=" + r.Holder
	}
	if r.Owner != "" {
		s += " owner=" + r.Owner
	}
	if r.RetryAfter > 0 {
		s += " retry-after=" + r.RetryAfter.String()
	}
	return s
}

func fmtLeases(verb string, ls []Lease, none string) string {
	if len(ls) == 0 {
		return none
	}
	var b strings.Builder
	for _, l := range ls {
		if verb != "" {
			b.WriteString(verb + " ")
		}
		fmt.Fprintf(&b, "%s in %s holder=%s token=%d", l.Lock, l.Group, l.Holder, l.Token)
		if l.Attempt > 0 {
			fmt.Fprintf(&b, " attempt=%d", l.Attempt)
		}
		b.WriteString(" expires=" + fmtTime(l.Expires) + "\n")
	}
	return b.String()
}

func fmtTime(ts time.Time) string { return ts.Sub(epoch).String() }

func nonEmptyLines(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

func durArg(t *testing.T, d *datadriven.TestData, key string) time.Duration {
	var s string
	d.ScanArgs(t, key, &s)
	v, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return v
}

func timeArg(t *testing.T, d *datadriven.TestData) time.Time {
	return epoch.Add(durArg(t, d, "t"))
}

// groupArg defaults to g, the group most transcripts are about.
func groupArg(t *testing.T, d *datadriven.TestData) string {
	group := "g"
	if d.HasArg("group") {
		d.ScanArgs(t, "group", &group)
	}
	if group == `""` {
		group = ""
	}
	return group
}

func cidArg(t *testing.T, d *datadriven.TestData) string {
	var cid string
	d.ScanArgs(t, "cid", &cid)
	if cid == `""` {
		cid = ""
	}
	return cid
}

func leaseArg(t *testing.T, d *datadriven.TestData) time.Duration {
	if !d.HasArg("lease") {
		return 0
	}
	return durArg(t, d, "lease")
}

func queuesArg(t *testing.T, d *datadriven.TestData) []Queue {
	arg, ok := d.Arg("queues")
	if !ok {
		t.Fatal("missing queues")
	}
	var qs []Queue
	for _, v := range arg.Vals {
		qs = append(qs, parseQueue(t, v))
	}
	return qs
}

func mgArg(t *testing.T, d *datadriven.TestData) MessageGroup {
	var s string
	d.ScanArgs(t, "mg", &s)
	return parseMessageGroup(t, s)
}

// parseQueue parses topic/brokerName/queueId.
func parseQueue(t *testing.T, s string) Queue {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		t.Fatalf("bad queue %q", s)
	}
	id, err := strconv.Atoi(parts[2])
	if err != nil {
		t.Fatalf("bad queue %q: %v", s, err)
	}
	return Queue{Topic: parts[0], BrokerName: parts[1], QueueID: id}
}

// parseMessageGroup parses topic/name.
func parseMessageGroup(t *testing.T, s string) MessageGroup {
	topic, name, ok := strings.Cut(s, "/")
	if !ok {
		t.Fatalf("bad message group %q", s)
	}
	return MessageGroup{Topic: topic, Name: name}
}
