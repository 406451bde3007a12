package controller

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// Metrics are the controller's Prometheus metrics. A nil *Metrics records
// nothing, which keeps unit tests free of registries.
type Metrics struct {
	startSeconds     prometheus.Histogram
	idleStops        prometheus.Counter
	rolloutsApplied  prometheus.Counter
	rolloutsDeferred prometheus.Counter
}

// NewMetrics registers the controller's metrics with reg. The
// environments-by-phase gauge is computed from reader (the cache) at scrape
// time, so it is never out of step with the objects.
func NewMetrics(reg prometheus.Registerer, reader client.Reader) *Metrics {
	m := &Metrics{
		startSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "userland_start_seconds",
			Help:    "Seconds from an environment's creation or wake-up to Ready.",
			Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600},
		}),
		idleStops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "userland_idle_stops_total", Help: "Environments stopped for idleness.",
		}),
		rolloutsApplied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "userland_rollouts_applied_total", Help: "Template changes applied to an environment.",
		}),
		rolloutsDeferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "userland_rollouts_deferred_total", Help: "Reconciles that deferred a template change per its rollout policy.",
		}),
	}
	reg.MustRegister(m.startSeconds, m.idleStops, m.rolloutsApplied, m.rolloutsDeferred, &phaseCollector{reader: reader})
	return m
}

func (m *Metrics) observeStart(d time.Duration) {
	if m != nil {
		m.startSeconds.Observe(d.Seconds())
	}
}

func (m *Metrics) idleStop() {
	if m != nil {
		m.idleStops.Inc()
	}
}

func (m *Metrics) rolloutApplied() {
	if m != nil {
		m.rolloutsApplied.Inc()
	}
}

func (m *Metrics) rolloutDeferred() {
	if m != nil {
		m.rolloutsDeferred.Inc()
	}
}

var phaseDesc = prometheus.NewDesc("userland_environments", "Userlands by phase.", []string{"phase"}, nil)

// phaseCollector counts Userlands by phase from the cache at scrape time.
type phaseCollector struct{ reader client.Reader }

func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- phaseDesc }

func (c *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	var list v1alpha1.UserlandList
	if err := c.reader.List(context.Background(), &list, client.UnsafeDisableDeepCopy); err != nil {
		ch <- prometheus.NewInvalidMetric(phaseDesc, err)
		return
	}
	counts := map[v1alpha1.Phase]int{
		v1alpha1.PhasePending: 0, v1alpha1.PhaseStarting: 0, v1alpha1.PhaseReady: 0,
		v1alpha1.PhaseStopped: 0, v1alpha1.PhaseFailed: 0,
	}
	for i := range list.Items {
		phase := list.Items[i].Status.Phase
		if phase == "" {
			// Not reconciled yet: counted with Pending, in one series.
			phase = v1alpha1.PhasePending
		}
		counts[phase]++
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(phaseDesc, prometheus.GaugeValue, float64(n), string(phase))
	}
}
