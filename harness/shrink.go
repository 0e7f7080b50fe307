package harness

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/allocd/allocd/abi"
)

// predicate re-runs one check on a scenario (and event) and returns its reason when the check
// still fails, "" when it passes.
type predicate func(sc *Scenario, ev *Event) string

// minimize turns a check's first failure into a Failure with the smallest scenario found.
func (r *runner) minimize(check string, f *found) *Failure {
	out := &Failure{
		Check: check, Reason: f.reason, FirstSeen: f.where + ": " + f.reason,
		Occurrences: r.counts[check], Scenario: f.sc, Event: f.ev, cause: f.cause,
	}
	pred := r.predicate(check)
	if pred == nil || r.opts.ShrinkBudget < 0 {
		return out
	}
	s := &shrinker{ctx: r.ctx, pred: pred, budget: r.opts.ShrinkBudget, deadline: time.Now().Add(r.opts.ShrinkTime)}
	sc, ev := s.shrink(f.sc, f.ev)
	if sc == f.sc {
		return out
	}
	if reason := pred(sc, ev); reason != "" { // "" only for a flaky failure: keep what was seen
		out.Scenario, out.Event, out.Reason, out.Shrunk = sc, ev, reason, true
	}
	return out
}

func (r *runner) predicate(check string) predicate {
	switch check {
	case CheckVectors:
		return nil // a vector is what it is
	case CheckDeterminism:
		return func(sc *Scenario, _ *Event) string { return r.deterministic(sc) }
	case CheckStability:
		return func(sc *Scenario, ev *Event) string {
			if ev == nil {
				return ""
			}
			before := r.evaluate(sc, false)
			if !before.ok() {
				return ""
			}
			_, _, reason := r.movement(sc, before, *ev, false)
			return reason
		}
	default:
		return func(sc *Scenario, _ *Event) string { return r.evaluate(sc, false).reason(check) }
	}
}

// deterministic asks about sc several times, sequentially and concurrently, alone for a few
// members and with its targets reversed, and returns the first difference.
func (r *runner) deterministic(sc *Scenario) string {
	req, first, err := r.call(sc, false)
	if err != nil || abi.ValidateFor(&r.info, req, first) != nil {
		return ""
	}
	for range 2 {
		_, again, err := r.call(sc, false)
		if err != nil {
			return "a repeated call failed where the first succeeded: " + err.Error()
		}
		if d := sameAnswer(req, first, again); d != "" {
			return d
		}
	}
	var wg sync.WaitGroup
	answers := make([]*abi.Response, 2)
	errs := make([]error, 2)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = r.p.Allocate(r.ctx, sc.Request())
			r.calls.Add(1)
		}()
	}
	wg.Wait()
	for i := range answers {
		if errs[i] != nil {
			return "a concurrent call failed where the first succeeded: " + errs[i].Error()
		}
		if d := sameAnswer(req, first, answers[i]); d != "" {
			return d + " (concurrent calls)"
		}
	}
	for _, m := range req.Consumers[:min(3, len(req.Consumers))] {
		alone := sc.Request()
		alone.Targets = []string{m}
		resp, err := r.p.Allocate(r.ctx, alone)
		r.calls.Add(1)
		if err != nil {
			return "a call for one consumer failed where the whole group's succeeded: " + err.Error()
		}
		if d := sameForTargets(req, first, alone, resp, "when asked with the whole group", "when asked alone"); d != "" {
			return d
		}
	}
	if len(req.Consumers) > 1 {
		rev := sc.Request()
		rev.Targets = slices.Clone(req.Consumers)
		slices.Reverse(rev.Targets)
		resp, err := r.p.Allocate(r.ctx, rev)
		r.calls.Add(1)
		if err != nil {
			return "a call with the targets reversed failed: " + err.Error()
		}
		if d := sameForTargets(req, first, rev, resp, "with the targets in cidAll order", "with them reversed"); d != "" {
			return d
		}
	}
	return ""
}

// shrinker searches for a smaller scenario on which pred still fails, within a budget of
// evaluations and a deadline.
type shrinker struct {
	ctx      context.Context
	pred     predicate
	budget   int
	deadline time.Time
	evals    int
}

func (s *shrinker) exhausted() bool {
	return s.evals >= s.budget || time.Now().After(s.deadline) || s.ctx.Err() != nil
}

func (s *shrinker) fails(sc *Scenario, ev *Event) bool {
	if sc == nil || s.exhausted() {
		return false
	}
	s.evals++
	return s.pred(sc, ev) != ""
}

// shrink drops the optional parts, then removes consumers and queues in ever smaller chunks while
// the failure persists, then tries short names and compact queue ids.
func (s *shrinker) shrink(sc *Scenario, ev *Event) (*Scenario, *Event) {
	cur := sc
	drops := []func(c *Scenario) bool{
		func(c *Scenario) bool { ok := c.Outsider != ""; c.Outsider = ""; return ok },
		func(c *Scenario) bool { ok := c.PrevOwners != nil; c.PrevOwners = nil; return ok },
		func(c *Scenario) bool { ok := c.QueueAttrs != nil; c.QueueAttrs = nil; return ok },
		func(c *Scenario) bool { ok := c.ConsumerAttrs != nil; c.ConsumerAttrs = nil; return ok },
	}
	for _, drop := range drops {
		if c := cur.clone(); drop(c) && s.fails(c, ev) {
			cur = c
		}
	}
	for changed := true; changed && !s.exhausted(); {
		changed = false
		for _, queues := range []bool{false, true} {
			if c := s.removeChunks(cur, ev, queues); c != cur {
				cur, changed = c, true
			}
		}
	}
	if c, e := renameConsumers(cur, ev); s.fails(c, e) {
		cur, ev = c, e
	} else if c := cur.clone(); c.Group != "g" {
		if c.Group = "g"; s.fails(c, ev) {
			cur = c
		}
	}
	if c := renameQueues(cur); s.fails(c, ev) {
		cur = c
	}
	return cur, ev
}

// removeChunks removes runs of consumers (or queues), halving the run length down to one.
func (s *shrinker) removeChunks(cur *Scenario, ev *Event, queues bool) *Scenario {
	size := func(c *Scenario) int {
		if queues {
			return len(c.MQAll)
		}
		return len(c.CIDAll)
	}
	for k := size(cur) / 2; k >= 1 && !s.exhausted(); {
		removed := false
		for start := 0; start < size(cur) && !s.exhausted(); {
			if c := without(cur, ev, queues, start, k); s.fails(c, ev) {
				cur, removed = c, true
				continue
			}
			start += k
		}
		if !removed || k > size(cur)/2 {
			k /= 2
		}
	}
	return cur
}

// without returns cur without consumers (or queues) [start, start+k), or nil when that would
// leave no queue, no consumer, or remove the consumer that an event needs.
func without(cur *Scenario, ev *Event, queues bool, start, k int) *Scenario {
	c := cur.clone()
	if queues {
		end := min(start+k, len(c.MQAll))
		if end-start >= len(c.MQAll) {
			return nil
		}
		c.MQAll = slices.Delete(c.MQAll, start, end)
		if c.QueueAttrs != nil {
			c.QueueAttrs = slices.Delete(c.QueueAttrs, start, end)
		}
		if c.PrevOwners != nil {
			c.PrevOwners = slices.Delete(c.PrevOwners, start, end)
		}
		return c
	}
	end := min(start+k, len(c.CIDAll))
	least := 1
	if ev != nil && ev.Kind == Leave {
		least = 2
		if i := slices.Index(c.CIDAll, ev.Consumer); i >= start && i < end {
			return nil
		}
	}
	if len(c.CIDAll)-(end-start) < least {
		return nil
	}
	c.CIDAll = slices.Delete(c.CIDAll, start, end)
	if c.ConsumerAttrs != nil {
		c.ConsumerAttrs = slices.Delete(c.ConsumerAttrs, start, end)
	}
	return c
}

// renameConsumers gives the consumers short ids that sort as theirs did (c0, c1, ...; a joining
// consumer gets the id of its place among them), previous owners that are gone and the outsider
// short ids too, and the group a short name.
func renameConsumers(cur *Scenario, ev *Event) (*Scenario, *Event) {
	c := cur.clone()
	all := slices.Clone(c.CIDAll)
	if ev != nil && ev.Kind == Join {
		all = append(all, ev.Consumer)
		slices.Sort(all)
	}
	width := len(fmt.Sprint(max(0, len(all)-1)))
	names := map[string]string{}
	for i, id := range all {
		names[id] = fmt.Sprintf("c%0*d", width, i)
	}
	gone := 0
	rename := func(id string) string {
		if id == "" {
			return ""
		}
		if n, ok := names[id]; ok {
			return n
		}
		n := fmt.Sprintf("gone%d", gone)
		gone++
		names[id] = n
		return n
	}
	for i, id := range c.CIDAll {
		c.CIDAll[i] = rename(id)
	}
	for i, id := range c.PrevOwners {
		c.PrevOwners[i] = rename(id)
	}
	if c.Outsider != "" {
		c.Outsider = "outsider"
	}
	c.Group = "g"
	if ev == nil {
		return c, nil
	}
	e := *ev
	e.Consumer = rename(e.Consumer)
	return c, &e
}

// renameQueues gives topics and brokers short names in the same order and numbers each run of
// queue ids from 0.
func renameQueues(cur *Scenario) *Scenario {
	c := cur.clone()
	short := func(get func(q abi.Queue) string, prefix string) map[string]string {
		var seen []string
		for _, q := range c.MQAll {
			if n := get(q); !slices.Contains(seen, n) {
				seen = append(seen, n)
			}
		}
		slices.Sort(seen)
		m := map[string]string{}
		for i, n := range seen {
			m[n] = fmt.Sprintf("%s%d", prefix, i)
		}
		return m
	}
	topics := short(func(q abi.Queue) string { return q.Topic }, "T")
	brokers := short(func(q abi.Queue) string { return q.BrokerName }, "b")
	var last abi.Queue
	var next int32
	for i, q := range c.MQAll {
		if i == 0 || q.Topic != last.Topic || q.BrokerName != last.BrokerName {
			next = 0
		}
		last = q
		c.MQAll[i] = abi.Queue{Topic: topics[q.Topic], BrokerName: brokers[q.BrokerName], QueueID: next}
		next++
	}
	c.canonicalize()
	return c
}
