package controller

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/course"
)

// budgetCollector reports budget usage from the cache at scrape time: a
// running environment's usage is computed on read (budget.Used), so the
// metrics move every scrape while the objects are written only at starts,
// stops and rollovers. Series are summed by namespace, course and
// template; the user label, one series per person, only when asked for
// (a university's roster is thousands of series).
type budgetCollector struct {
	reader    client.Reader
	clock     clock.PassiveClock
	userLabel bool
	used      *prometheus.Desc
	remaining *prometheus.Desc
}

func newBudgetCollector(reader client.Reader, clk clock.PassiveClock, userLabel bool) *budgetCollector {
	labels := []string{"namespace", "course", "template"}
	if userLabel {
		labels = append(labels, "user")
	}
	return &budgetCollector{reader: reader, clock: clk, userLabel: userLabel,
		used: prometheus.NewDesc("userland_usage_seconds_total",
			"Budgeted (weighted) seconds used in the current budget period; resets at each period's start.", labels, nil),
		remaining: prometheus.NewDesc("userland_budget_remaining_seconds",
			"Budgeted (weighted) seconds left in the current budget period, grants included; a course's budget is each student's, shared by their environments of the course, and counts once per environment.", labels, nil),
	}
}

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.used; ch <- c.remaining }

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	var list v1alpha1.UserlandList
	if err := c.reader.List(context.Background(), &list, client.UnsafeDisableDeepCopy); err != nil {
		ch <- prometheus.NewInvalidMetric(c.used, err)
		return
	}
	now := c.clock.Now()
	type key struct{ namespace, course, template, user string }
	used, remaining := map[key]int64{}, map[key]int64{}
	sharing := course.NewBudgetSharing(course.Pointers(list.Items), course.Remembered(func(namespace, name string) (*v1alpha1.Course, error) {
		var crs v1alpha1.Course
		err := c.reader.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &crs)
		return &crs, err
	}))
	for i := range list.Items {
		ul := &list.Items[i]
		if ul.Status.Usage == nil {
			continue
		}
		k := key{ul.Namespace, ul.Labels[v1alpha1.LabelCourse], ul.Spec.TemplateRef.Name, ""}
		if c.userLabel {
			k.user = ul.Spec.User
		}
		used[k] += budget.Used(ul.Status.Usage, now)
		// A course's budget is the student's: what is left of it is
		// left to each of their environments of the course.
		remaining[k] += max(0, budget.Pool(ul.Status.Usage, sharing.Of(ul), now).Remaining)
	}
	for k, v := range used {
		values := []string{k.namespace, k.course, k.template}
		if c.userLabel {
			values = append(values, k.user)
		}
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.CounterValue, float64(v), values...)
		ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(remaining[k]), values...)
	}
}
