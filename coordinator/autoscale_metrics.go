package coordinator

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/allocd/allocd/autoscale"
)

// scaleMetrics are the auto-scaler's Prometheus series.
type scaleMetrics struct {
	steps    *prometheus.CounterVec // topic, kind (set-read, set-write), direction (up, down)
	events   *prometheus.CounterVec // topic, kind
	failures *prometheus.CounterVec // topic
	pending  *prometheus.GaugeVec   // topic
	blocked  *prometheus.GaugeVec   // topic
	target   *prometheus.GaugeVec   // topic
}

func newScaleMetrics(reg prometheus.Registerer) (*scaleMetrics, error) {
	m := &scaleMetrics{
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_autoscale_steps_total", Help: "Queue count changes applied by auto-scaling, by count (set-read, set-write) and direction (up, down).",
		}, []string{"topic", "kind", "direction"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_autoscale_events_total", Help: "Auto-scaling events: target changes, steps, plans, superseded and cancelled plans, unconfirmed expansions, failed drain checks.",
		}, []string{"topic", "kind"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_autoscale_store_failures_total", Help: "Auto-scaling changes the store refused (the counts stayed as they were).",
		}, []string{"topic"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "allocd_autoscale_pending", Help: "1 while an auto-scaling step is pending for the topic.",
		}, []string{"topic"}),
		blocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "allocd_autoscale_blocked_queues", Help: "Queues a pending read drop waits to see drained, as of its last check.",
		}, []string{"topic"}),
		target: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "allocd_autoscale_target", Help: "Queue count per broker the auto-scaler aims at.",
		}, []string{"topic"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.steps, m.events, m.failures, m.pending, m.blocked, m.target} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// observe sets the gauges from a topic's status.
func (m *scaleMetrics) observe(topic string, s autoscale.Status) {
	pending, blocked := 0.0, 0.0
	if s.Pending != nil {
		pending = 1
		blocked = float64(s.Pending.BlockedQueues)
	}
	m.pending.WithLabelValues(topic).Set(pending)
	m.blocked.WithLabelValues(topic).Set(blocked)
	m.target.WithLabelValues(topic).Set(float64(s.Target))
}

// forget drops a topic's series when it stops being scaled.
func (m *scaleMetrics) forget(topic string) {
	for _, v := range []*prometheus.GaugeVec{m.pending, m.blocked, m.target} {
		v.DeleteLabelValues(topic)
	}
	for _, v := range []*prometheus.CounterVec{m.steps, m.events, m.failures} {
		v.DeletePartialMatch(prometheus.Labels{"topic": topic})
	}
}
