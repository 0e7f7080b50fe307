package main

import (
	"context"
	"math"
	"math/bits"
	"sync"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/harness"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/model"
	"github.com/allocd/allocd/registry"
)

// pluginView is a plugin as /v1/plugins shows it: the registry's status, the daemon's calls to
// it, and the harness's report on the version serving.
type pluginView struct {
	registry.Status
	Allocate *model.PluginCalls `json:"allocate,omitempty"`
	Harness  *model.CheckReport `json:"harness,omitempty"`
}

// pluginStatus shows the registry's status on /v1/plugins, with the calls and check reports.
type pluginStatus struct {
	r      *registry.Registry
	calls  *callStats
	checks *checkReports
}

func (p pluginStatus) view(s registry.Status) pluginView {
	v := pluginView{Status: s, Harness: p.checks.of(s.Name, s.ActiveHash)}
	if c, ok := p.calls.of(s.Name); ok {
		v.Allocate = &c
	}
	return v
}

func (p pluginStatus) List() any {
	list := p.r.Status()
	out := make([]pluginView, len(list))
	for i, s := range list {
		out[i] = p.view(s)
	}
	return out
}

func (p pluginStatus) Get(name string) (any, bool) {
	s, ok := p.r.StatusOf(name)
	if !ok {
		return nil, false
	}
	return p.view(s), true
}

// latencyBuckets: bucket i counts calls of [2^(i-1), 2^i) microseconds (bucket 0: under 1 us),
// the last one everything longer.
const latencyBuckets = 32

type pluginCalls struct {
	calls, errors int64
	total, max    time.Duration
	last          time.Time
	buckets       [latencyBuckets]int64
}

// callStats counts the coordinator's allocation calls per plugin name. Names are those of
// plugins the registry served, so the map is bounded by the plugin folder.
type callStats struct {
	mu sync.Mutex
	by map[string]*pluginCalls
}

func newCallStats() *callStats { return &callStats{by: map[string]*pluginCalls{}} }

func (s *callStats) observe(plugin string, d time.Duration, err error, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.by[plugin]
	if c == nil {
		c = &pluginCalls{}
		s.by[plugin] = c
	}
	c.calls++
	if err != nil {
		c.errors++
	}
	c.total += d
	c.max = max(c.max, d)
	c.last = now
	c.buckets[min(bits.Len64(uint64(max(d.Microseconds(), 0))), latencyBuckets-1)]++
}

func (s *callStats) of(plugin string) (model.PluginCalls, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.by[plugin]
	if c == nil || c.calls == 0 {
		return model.PluginCalls{}, false
	}
	quantile := func(q float64) time.Duration {
		rank := int64(math.Ceil(q * float64(c.calls))) // nearest rank
		var seen int64
		for i, n := range c.buckets {
			if seen += n; seen >= rank {
				if i == 0 {
					return time.Microsecond
				}
				return min(time.Duration(1<<i)*time.Microsecond, c.max) // the bucket's upper bound
			}
		}
		return c.max
	}
	return model.PluginCalls{
		Calls: c.calls, Errors: c.errors, Mean: c.total / time.Duration(c.calls),
		P50: quantile(0.5), P99: quantile(0.99), Max: c.max, Last: c.last.UTC(),
	}, true
}

// checkReports keeps the harness's report on the last few versions of each plugin.
type checkReports struct {
	mu sync.Mutex
	by map[string][]model.CheckReport // newest last
}

// keptReports is how many versions' reports a plugin keeps.
const keptReports = 4

func newCheckReports() *checkReports { return &checkReports{by: map[string][]model.CheckReport{}} }

// validate is the registry's Validate: the harness's quick pass, whose report it keeps.
func (c *checkReports) validate(ctx context.Context, p *host.Plugin) error {
	rep, err := harness.QuickReport(ctx, p, nil)
	c.add(p.Name(), p.Hash(), rep, err, time.Now())
	return err
}

func (c *checkReports) add(name, hash string, rep *harness.Report, err error, now time.Time) {
	r := model.CheckReport{Hash: hash, At: now.UTC(), Passed: err == nil}
	if err != nil {
		r.Error = err.Error()
	}
	if rep != nil {
		r.Scenarios, r.Calls, r.Elapsed = rep.Scenarios, rep.Calls, rep.Elapsed
		r.P50, r.P99, r.Max = rep.Cost.P50, rep.Cost.P99, rep.Cost.Max
		for _, ch := range rep.Checks {
			r.Checks = append(r.Checks, model.CheckLine{Name: ch.Name, Status: ch.Status, Detail: ch.Detail})
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	list := append(c.by[name], r)
	if len(list) > keptReports {
		list = list[len(list)-keptReports:]
	}
	c.by[name] = list
}

// of returns the newest report on version hash of plugin name, nil when there is none.
func (c *checkReports) of(name, hash string) *model.CheckReport {
	if hash == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.by[name]
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].Hash == hash {
			r := list[i]
			return &r
		}
	}
	return nil
}

// registryAllocator is the registry as the coordinator's Allocator: a version is a content hash.
// Every call is counted in calls, for /v1/plugins.
type registryAllocator struct {
	r     *registry.Registry
	calls *callStats
}

func (a registryAllocator) Allocate(ctx context.Context, plugin string, req *abi.Request) (*abi.Response, string, error) {
	start := time.Now()
	resp, v, err := a.r.Allocate(ctx, plugin, req)
	a.calls.observe(plugin, time.Since(start), err, time.Now())
	return resp, v.Hash, err
}

var _ coordinator.OwnerAllocator = registryAllocator{}

// AllocateOwners makes registryAllocator a coordinator.OwnerAllocator: the coordinator reads
// whole-group answers in the owner form.
func (a registryAllocator) AllocateOwners(ctx context.Context, plugin string, req *abi.Request) (*abi.Response, string, error) {
	start := time.Now()
	resp, v, err := a.r.AllocateOwners(ctx, plugin, req)
	a.calls.observe(plugin, time.Since(start), err, time.Now())
	return resp, v.Hash, err
}
