package autoscale_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/autoscale"
	"github.com/cockroachdb/datadriven"
)

// TestInteraction replays the transcripts in testdata/. Each is a story: a topic is created,
// members join and leave, offsets are reported, the clock moves, and every step and event the
// state machine returns is printed with its time. Run with -rewrite to regenerate the
// expected output after a deliberate change, then read the diff like a story.
//
// Commands (times are offsets from 00:00:00, e.g. at=5m10s; they may not go backwards):
//
//	new [name=T] brokers=(a,b) read=N write=N [enabled=false] [min=N] [max=N] [<duration field>=D ...]
//	members at=D              one line per group: <group> <clustering|broadcasting> [member ...]
//	join at=D / leave at=D    one line per group: <group> member ...
//	remove-group at=D group=G
//	confirm at=D [layout=N]   one line per group: <group> member ... | <group> *   (layout: current)
//	offsets at=D [group=G]    one line per queue: <broker>/<queue> [committed=N] [max=N] [last-write=D]
//	set-broker at=D name=B read=N write=N / remove-broker at=D name=B
//	policy at=D <field>=V ... change the policy (same fields as new)
//	tick at=D                 one clock tick
//	run until=D               tick at every deadline up to D, as the daemon's timer would
//	status / deadline / state print what the daemon would show or persist
//	restart                   State -> JSON -> Restore, as a daemon restart does
//
// After every command the harness checks the invariants: write never above read on any
// broker, one EventStep per step, State survives a JSON round trip unchanged, an Output that
// does not ask to be persisted changed nothing durable, and after an input nothing is due
// that has not run (NextDeadline is in the future).
func TestInteraction(t *testing.T) {
	// Only the transcripts: testdata/fuzz holds the fuzzer's findings, if any.
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no transcripts in testdata: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			h := &harness{now: base, groups: map[string]*autoscale.Group{}}
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				return h.run(t, d)
			})
		})
	}
}

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type harness struct {
	topic  *autoscale.Topic
	now    time.Time
	groups map[string]*autoscale.Group
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	t.Helper()
	if d.Cmd == "new" {
		return h.create(t, d)
	}
	if h.topic == nil {
		d.Fatalf(t, "%s before new", d.Cmd)
	}
	before := h.topic.State()
	var (
		out   autoscale.Output
		err   error
		input = true
		b     strings.Builder
	)
	switch d.Cmd {
	case "members", "join", "leave":
		h.advance(t, d)
		for _, line := range lines(d.Input) {
			fields := strings.Fields(line)
			var g *autoscale.Group
			switch d.Cmd {
			case "members":
				if len(fields) < 2 {
					d.Fatalf(t, "want <group> <model> [member ...]: %q", line)
				}
				g = &autoscale.Group{Name: fields[0], Members: fields[2:]}
				if err := g.Model.UnmarshalText([]byte(fields[1])); err != nil {
					d.Fatalf(t, "%v", err)
				}
			case "join":
				g = h.group(t, d, fields[0])
				g.Members = append(g.Members, fields[1:]...)
			case "leave":
				g = h.group(t, d, fields[0])
				g.Members = slices.DeleteFunc(g.Members, func(m string) bool { return slices.Contains(fields[1:], m) })
			}
			h.groups[g.Name] = g
			o, e := h.topic.SetGroup(h.now, *g)
			out, err = merge(out, o), cmpErr(err, e)
		}
	case "remove-group":
		h.advance(t, d)
		var name string
		d.ScanArgs(t, "group", &name)
		delete(h.groups, name)
		out = h.topic.RemoveGroup(h.now, name)
	case "confirm":
		h.advance(t, d)
		layout := h.topic.Layout()
		if d.HasArg("layout") {
			d.ScanArgs(t, "layout", &layout)
		}
		for _, line := range lines(d.Input) {
			fields := strings.Fields(line)
			members := fields[1:]
			if len(members) == 1 && members[0] == "*" {
				members = h.group(t, d, fields[0]).Members
			}
			for _, m := range members {
				o, e := h.topic.Confirm(h.now, fields[0], m, layout)
				out, err = merge(out, o), cmpErr(err, e)
			}
		}
	case "offsets":
		h.advance(t, d)
		var group string
		if d.HasArg("group") {
			d.ScanArgs(t, "group", &group)
		}
		var offsets []autoscale.Offset
		for _, line := range lines(d.Input) {
			offsets = append(offsets, parseOffset(t, d, line))
		}
		out, err = h.topic.ReportOffsets(h.now, group, offsets)
	case "set-broker":
		h.advance(t, d)
		var br autoscale.Broker
		d.ScanArgs(t, "name", &br.Name)
		d.ScanArgs(t, "read", &br.Read)
		d.ScanArgs(t, "write", &br.Write)
		out, err = h.topic.SetBroker(h.now, br)
	case "remove-broker":
		h.advance(t, d)
		var name string
		d.ScanArgs(t, "name", &name)
		out = h.topic.RemoveBroker(h.now, name)
	case "policy":
		h.advance(t, d)
		p := h.topic.Policy()
		applyPolicyArgs(t, d, &p)
		out, err = h.topic.SetPolicy(h.now, p)
	case "tick":
		h.advance(t, d)
		out = h.topic.Tick(h.now)
	case "run":
		var until time.Duration
		d.ScanArgs(t, "until", &until)
		end := base.Add(until)
		if end.Before(h.now) {
			d.Fatalf(t, "until=%s is before the current time %s", until, clock(h.now))
		}
		for {
			due, ok := h.topic.NextDeadline()
			if !ok || due.After(end) {
				break
			}
			if due.After(h.now) {
				h.now = due
			}
			o := h.topic.Tick(h.now)
			if len(o.Events) == 0 {
				d.Fatalf(t, "tick at deadline %s did nothing: the daemon's timer would spin", clock(due))
			}
			h.check(t, d, before, o, true)
			before = h.topic.State()
			out = merge(out, o)
		}
		h.now = end
		input = false
	case "status":
		input = false
		writeStatus(&b, h.topic.Status())
	case "deadline":
		input = false
		if due, ok := h.topic.NextDeadline(); ok {
			fmt.Fprintf(&b, "next deadline %s\n", clock(due))
		} else {
			b.WriteString("no deadline\n")
		}
	case "state":
		input = false
		js, err := json.MarshalIndent(h.topic.State(), "", "  ")
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		b.WriteString(timesToClock(string(js)) + "\n")
	case "restart":
		input = false
		js, err := json.Marshal(h.topic.State())
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		var s autoscale.State
		if err := json.Unmarshal(js, &s); err != nil {
			d.Fatalf(t, "%v", err)
		}
		if h.topic, err = autoscale.Restore(s); err != nil {
			d.Fatalf(t, "%v", err)
		}
		fmt.Fprintf(&b, "restarted: %s\n", timesToClock(s.String()))
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	writeOutput(&b, out)
	if len(out.Steps) > 0 {
		b.WriteString(countsLine(h.topic.Brokers()) + "\n")
	}
	if input {
		h.check(t, d, before, out, true)
	} else {
		h.check(t, d, before, out, false)
	}
	if b.Len() == 0 {
		return "ok\n"
	}
	return b.String()
}

func (h *harness) create(t *testing.T, d *datadriven.TestData) string {
	name := "orders"
	if d.HasArg("name") {
		d.ScanArgs(t, "name", &name)
	}
	var names []string
	var read, write int
	d.ScanArgs(t, "brokers", &names)
	d.ScanArgs(t, "read", &read)
	d.ScanArgs(t, "write", &write)
	p := autoscale.DefaultPolicy()
	p.Enabled = true
	applyPolicyArgs(t, d, &p)
	var brokers []autoscale.Broker
	for _, n := range names {
		brokers = append(brokers, autoscale.Broker{Name: n, Read: read, Write: write})
	}
	topic, err := autoscale.New(name, p, brokers)
	if err != nil {
		return fmt.Sprintf("error: %v\n", err)
	}
	h.topic = topic
	js, _ := json.Marshal(p)
	return fmt.Sprintf("%s\npolicy %s\n", countsLine(topic.Brokers()), js)
}

// advance moves the clock to the command's at=, which may not go backwards.
func (h *harness) advance(t *testing.T, d *datadriven.TestData) {
	if !d.HasArg("at") {
		return
	}
	var at time.Duration
	d.ScanArgs(t, "at", &at)
	next := base.Add(at)
	if next.Before(h.now) {
		d.Fatalf(t, "at=%s is before the current time %s", at, clock(h.now))
	}
	h.now = next
}

func (h *harness) group(t *testing.T, d *datadriven.TestData, name string) *autoscale.Group {
	g := h.groups[name]
	if g == nil {
		d.Fatalf(t, "unknown group %s: declare it with members first", name)
	}
	c := *g
	c.Members = slices.Clone(g.Members)
	return &c
}

// check verifies the invariants every transcript relies on.
func (h *harness) check(t *testing.T, d *datadriven.TestData, before autoscale.State, out autoscale.Output, input bool) {
	t.Helper()
	for _, b := range h.topic.Brokers() {
		if b.Write > b.Read {
			d.Fatalf(t, "broker %s: write %d above read %d", b.Name, b.Write, b.Read)
		}
	}
	var stepEvents int
	for _, e := range out.Events {
		if e.Kind == autoscale.EventStep {
			stepEvents++
		}
	}
	if stepEvents != len(out.Steps) {
		d.Fatalf(t, "%d steps but %d step events", len(out.Steps), stepEvents)
	}
	after := h.topic.State()
	js1, err := json.Marshal(after)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	var s autoscale.State
	if err := json.Unmarshal(js1, &s); err != nil {
		d.Fatalf(t, "%v", err)
	}
	restored, err := autoscale.Restore(s)
	if err != nil {
		d.Fatalf(t, "Restore(State()): %v", err)
	}
	if js2, _ := json.Marshal(restored.State()); string(js1) != string(js2) {
		d.Fatalf(t, "State does not survive a round trip:\n%s\n%s", js1, js2)
	}
	if !input {
		return
	}
	if !out.Persist {
		if b, a := durable(before), durable(after); b != a {
			d.Fatalf(t, "durable state changed but Output.Persist is false:\nbefore %s\nafter  %s", b, a)
		}
	}
	if due, ok := h.topic.NextDeadline(); ok && !due.After(h.now) {
		d.Fatalf(t, "after an input at %s the next deadline %s has already passed", clock(h.now), clock(due))
	}
}

// durable is the part of State that Output.Persist promises to flag: all but members,
// confirmations, the value and age of committed offsets, and the informational due time.
func durable(s autoscale.State) string {
	for i := range s.Groups {
		s.Groups[i].Members = nil
	}
	for i := range s.Commits {
		s.Commits[i].Offset, s.Commits[i].Since = 0, time.Time{}
	}
	if s.Pending != nil {
		p := *s.Pending
		p.Due = time.Time{}
		s.Pending = &p
	}
	js, _ := json.Marshal(s)
	return string(js)
}

func applyPolicyArgs(t *testing.T, d *datadriven.TestData, p *autoscale.Policy) {
	for _, arg := range d.CmdArgs {
		var err error
		switch arg.Key {
		case "enabled":
			p.Enabled, err = strconv.ParseBool(arg.SingleVal(t))
		case "min":
			p.Min, err = strconv.Atoi(arg.SingleVal(t))
		case "max":
			p.Max, err = strconv.Atoi(arg.SingleVal(t))
		case "expandWriteDelay", "maxConfirmWait", "shrinkReadDelay", "shrinkStableFor", "drainQuietFor", "offsetRetention":
			err = p.UnmarshalJSON([]byte(fmt.Sprintf(`{%q:%q}`, arg.Key, arg.SingleVal(t))))
		}
		if err != nil {
			d.Fatalf(t, "%s: %v", arg.Key, err)
		}
	}
}

func parseOffset(t *testing.T, d *datadriven.TestData, line string) autoscale.Offset {
	fields := strings.Fields(line)
	broker, queue, ok := strings.Cut(fields[0], "/")
	if !ok {
		d.Fatalf(t, "want <broker>/<queue>: %q", fields[0])
	}
	o := autoscale.Offset{Broker: broker, Committed: -1, Max: -1}
	var err error
	if o.Queue, err = strconv.Atoi(queue); err != nil {
		d.Fatalf(t, "queue: %v", err)
	}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "committed":
			o.Committed, err = strconv.ParseInt(v, 10, 64)
		case "max":
			o.Max, err = strconv.ParseInt(v, 10, 64)
		case "last-write":
			var at time.Duration
			at, err = time.ParseDuration(v)
			o.LastWrite = base.Add(at)
		default:
			err = fmt.Errorf("unknown field %q", k)
		}
		if err != nil {
			d.Fatalf(t, "%s: %v", f, err)
		}
	}
	return o
}

func writeOutput(b *strings.Builder, out autoscale.Output) {
	for _, e := range out.Events {
		fmt.Fprintf(b, "%s %s: %s\n", clock(e.Time), e.Kind, timesToClock(e.Message))
	}
}

func writeStatus(b *strings.Builder, s autoscale.Status) {
	fmt.Fprintf(b, "%s\n", countsLine(s.Brokers))
	fmt.Fprintf(b, "target %d", s.Target)
	fmt.Fprintf(b, ", layout %d, gen %d", s.Layout, s.Generation)
	if !s.Enabled {
		b.WriteString(", disabled")
	}
	fmt.Fprintf(b, ": %s\n", s.Reason)
	p := s.Pending
	if p == nil {
		b.WriteString("pending: none\n")
		return
	}
	fmt.Fprintf(b, "pending: gen %d %s to %d, planned %s, due %s\n", p.Generation, p.Phase, p.To, clock(p.Since), clock(p.Due))
	fmt.Fprintf(b, "  %s\n", timesToClock(p.Wait))
	for _, bl := range p.Blockers {
		fmt.Fprintf(b, "  blocker: %s\n", bl)
	}
}

func countsLine(brokers []autoscale.Broker) string {
	parts := make([]string, len(brokers))
	for i, br := range brokers {
		parts[i] = fmt.Sprintf("%s read %d write %d", br.Name, br.Read, br.Write)
	}
	return "counts: " + strings.Join(parts, ", ")
}

// clock formats t as hours:minutes:seconds since base; hours may pass 24.
func clock(t time.Time) string {
	d := t.Sub(base)
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	return fmt.Sprintf("%s%02d:%02d:%02d", sign, int(d/time.Hour), int(d/time.Minute)%60, int(d/time.Second)%60)
}

var rfc3339 = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

// timesToClock rewrites the RFC 3339 times in messages as clock times.
func timesToClock(s string) string {
	return rfc3339.ReplaceAllStringFunc(s, func(m string) string {
		t, err := time.Parse(time.RFC3339, m)
		if err != nil {
			return m
		}
		return clock(t)
	})
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func merge(a, b autoscale.Output) autoscale.Output {
	a.Steps = append(a.Steps, b.Steps...)
	a.Events = append(a.Events, b.Events...)
	a.Persist = a.Persist || b.Persist
	return a
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
