package main

import (
	"errors"
	"testing"
	"time"

	"github.com/allocd/allocd/harness"
)

func TestCallStats(t *testing.T) {
	s := newCallStats()
	if _, ok := s.of("p"); ok {
		t.Fatal("stats of a plugin never called")
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 98 {
		s.observe("p", time.Duration(100+i)*time.Microsecond, nil, now) // 100..197 us
	}
	s.observe("p", 40*time.Millisecond, errors.New("trap"), now)
	s.observe("p", 50*time.Millisecond, nil, now.Add(time.Second))
	c, ok := s.of("p")
	if !ok || c.Calls != 100 || c.Errors != 1 || c.Max != 50*time.Millisecond || !c.Last.Equal(now.Add(time.Second)) {
		t.Fatalf("stats %+v", c)
	}
	// p50 is in [128, 256) us: reported as the bucket's upper bound; p99 in the 40 ms call's
	// bucket [32.8, 65.5) ms, capped at the max.
	if c.P50 != 256*time.Microsecond || c.P99 != 50*time.Millisecond {
		t.Errorf("p50 %v p99 %v, want 256us and 50ms", c.P50, c.P99)
	}
	if want := (98*100+98*97/2)*time.Microsecond + 90*time.Millisecond; c.Mean != want/100 {
		t.Errorf("mean %v, want %v", c.Mean, want/100)
	}
}

func TestCheckReports(t *testing.T) {
	c := newCheckReports()
	now := time.Now()
	rep := &harness.Report{Scenarios: 8, Calls: 40, Checks: []harness.CheckResult{{Name: "coverage", Status: harness.Pass}}}
	rep.Cost.P50 = time.Millisecond
	for i, h := range []string{"a", "b", "c", "d", "e"} {
		var err error
		if h == "e" {
			err = errors.New("coverage: queue 3 unassigned")
		}
		c.add("p", h, rep, err, now.Add(time.Duration(i)*time.Second))
	}
	if r := c.of("p", "a"); r != nil {
		t.Errorf("the oldest of 5 reports is kept (%d kept at most)", keptReports)
	}
	if r := c.of("p", "d"); r == nil || !r.Passed || r.Scenarios != 8 || r.P50 != time.Millisecond || len(r.Checks) != 1 {
		t.Errorf("report of d: %+v", r)
	}
	if r := c.of("p", "e"); r == nil || r.Passed || r.Error == "" {
		t.Errorf("report of e, which failed: %+v", r)
	}
	if c.of("p", "") != nil || c.of("q", "d") != nil {
		t.Errorf("a report for no version, or another plugin")
	}
}
