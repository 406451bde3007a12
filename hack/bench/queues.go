package main

import (
	"math"
	"sort"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// queueStats is one controller's work queue while provisioning, from
// controller-runtime's own metrics: how long items waited in the queue
// before a worker took them, how long the work took, the deepest the
// queue was (sampled), and its workers.
type queueStats struct {
	Name        string
	Wait, Work  histogram
	PeakDepth   float64
	Workers     float64
	Adds        float64
	Retries     float64
	SampleEvery time.Duration
}

// queueSampler scrapes the controller's metrics every period until
// stopped and keeps each queue's deepest sample.
type queueSampler struct {
	mu    sync.Mutex
	peak  map[string]float64
	every time.Duration
	done  chan struct{}
	wg    sync.WaitGroup
}

func sampleQueues(metricsURL string, every time.Duration) *queueSampler {
	s := &queueSampler{peak: map[string]float64{}, every: every, done: make(chan struct{})}
	s.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				m, err := scrape(metricsURL)
				if err != nil {
					continue
				}
				s.mu.Lock()
				for name, v := range gaugeBy(m, "workqueue_depth", "name") {
					s.peak[name] = max(s.peak[name], v)
				}
				s.mu.Unlock()
			}
		}
	})
	return s
}

// stop ends sampling and combines the peaks with the counters and
// histograms observed between before and after.
func (s *queueSampler) stop(before, after map[string]*dto.MetricFamily) []queueStats {
	close(s.done)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	workers := gaugeBy(after, "controller_runtime_max_concurrent_reconciles", "controller")
	adds0, adds1 := gaugeBy(before, "workqueue_adds_total", "name"), gaugeBy(after, "workqueue_adds_total", "name")
	retries0, retries1 := gaugeBy(before, "workqueue_retries_total", "name"), gaugeBy(after, "workqueue_retries_total", "name")
	var out []queueStats
	for name, adds := range adds1 {
		if adds-adds0[name] == 0 {
			continue // a queue that saw nothing while provisioning
		}
		of := func(l map[string]string) bool { return l["name"] == name }
		out = append(out, queueStats{
			Name:        name,
			Wait:        histogramOf(after, "workqueue_queue_duration_seconds", of).minus(histogramOf(before, "workqueue_queue_duration_seconds", of)),
			Work:        histogramOf(after, "workqueue_work_duration_seconds", of).minus(histogramOf(before, "workqueue_work_duration_seconds", of)),
			PeakDepth:   s.peak[name],
			Workers:     workers[name],
			Adds:        adds - adds0[name],
			Retries:     retries1[name] - retries0[name],
			SampleEvery: s.every,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Adds > out[j].Adds })
	return out
}

// gaugeBy is a gauge's or counter's value per value of one label.
func gaugeBy(families map[string]*dto.MetricFamily, name, label string) map[string]float64 {
	out := map[string]float64{}
	fam, ok := families[name]
	if !ok {
		return out
	}
	for _, m := range fam.GetMetric() {
		key := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				key = l.GetValue()
			}
		}
		switch {
		case m.GetGauge() != nil:
			out[key] += m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			out[key] += m.GetCounter().GetValue()
		}
	}
	return out
}

// writeQueues reports the work queues while provisioning.
func writeQueues(p func(string, ...any), r provisionResult) {
	if len(r.Queues) == 0 {
		return
	}
	p("The controller's work queues while provisioning (controller-runtime's metrics; depth sampled every %s; the quantiles are the upper bounds of the histograms' buckets):", r.Queues[0].SampleEvery)
	p("")
	p("| queue | workers | items added | delayed adds (RequeueAfter and error retries: the priority queue counts both as retries) | deepest | wait in queue p50 / p99 | work p50 / p99 |")
	p("|---|---|---|---|---|---|---|")
	for _, q := range r.Queues {
		p("| %s | %.0f | %.0f | %.0f | %.0f | %s / %s | %s / %s |", q.Name, q.Workers, q.Adds, q.Retries, q.PeakDepth,
			bucketSecs(q.Wait.Quantile(0.5)), bucketSecs(q.Wait.Quantile(0.99)), bucketSecs(q.Work.Quantile(0.5)), bucketSecs(q.Work.Quantile(0.99)))
	}
}

func bucketSecs(s float64) string {
	if s > 1e9 {
		return "> largest bucket"
	}
	return "≤ " + time.Duration(math.Round(s*float64(time.Second))).Round(time.Microsecond).String()
}
