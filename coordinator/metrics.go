package coordinator

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the coordinator's Prometheus series. They exist (and cost little) even when no
// Registerer is given, so the code never checks for nil.
type metrics struct {
	members     *prometheus.GaugeVec   // group
	generation  *prometheus.GaugeVec   // group, topic: the number in force
	generations *prometheus.CounterVec // group: new numbers published
	rebalances  *prometheus.CounterVec // group: recomputations run
	failures    *prometheus.CounterVec // group: recomputations that kept the previous generation
	expired     *prometheus.CounterVec // group: members dropped by the session timeout
	calls       *prometheus.CounterVec // plugin
	callErrors  *prometheus.CounterVec // plugin
	callSeconds *prometheus.HistogramVec
	// moved and revokeTimeouts are the history's and the handoff's (history.go, handoff.go).
	moved          *prometheus.HistogramVec // group: queues whose owner changed, per published generation
	revokeTimeouts *prometheus.CounterVec   // group: members removed for not confirming a revocation
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "allocd_group_members", Help: "Live members of a consumer group.",
		}, []string{"group"}),
		generation: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "allocd_generation", Help: "Number of the generation in force for a (group, topic).",
		}, []string{"group", "topic"}),
		generations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_generations_total", Help: "New generations published for a group.",
		}, []string{"group"}),
		rebalances: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_rebalances_total", Help: "Recomputations of a group's assignment (a (group, topic) whose inputs changed).",
		}, []string{"group"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_rebalance_failures_total", Help: "Recomputations that failed, leaving the previous generation in force.",
		}, []string{"group"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_members_expired_total", Help: "Members dropped for missing the session timeout.",
		}, []string{"group"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_allocate_calls_total", Help: "Allocation calls made to a strategy plugin (rebalances and previews).",
		}, []string{"plugin"}),
		callErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_allocate_errors_total", Help: "Allocation calls to a strategy plugin that failed.",
		}, []string{"plugin"}),
		callSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "allocd_allocate_seconds", Help: "Latency of allocation calls to a strategy plugin.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10), // 10 us .. 2.6 s
		}, []string{"plugin"}),
		moved: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "allocd_rebalance_moved_queues", Help: "Queues whose owner changed (to or from nobody included) in each published generation of a group.",
			Buckets: []float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096},
		}, []string{"group"}),
		revokeTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_handoff_revoke_timeouts_total", Help: "Members removed from a group because they did not confirm a revocation within the revoke timeout.",
		}, []string{"group"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.members, m.generation, m.generations, m.rebalances, m.failures, m.expired, m.calls, m.callErrors, m.callSeconds, m.moved, m.revokeTimeouts} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) observeCall(plugin string, d time.Duration, err error) {
	m.calls.WithLabelValues(plugin).Inc()
	m.callSeconds.WithLabelValues(plugin).Observe(d.Seconds())
	if err != nil {
		m.callErrors.WithLabelValues(plugin).Inc()
	}
}

// forgetGroup drops a deleted group's series.
func (m *metrics) forgetGroup(name string, g *group) {
	for _, v := range []*prometheus.GaugeVec{m.members} {
		v.DeleteLabelValues(name)
	}
	m.moved.DeleteLabelValues(name)
	for _, v := range []*prometheus.CounterVec{m.generations, m.rebalances, m.failures, m.expired, m.revokeTimeouts} {
		v.DeleteLabelValues(name)
	}
	for topic := range g.topics {
		m.generation.DeleteLabelValues(name, topic)
	}
}
