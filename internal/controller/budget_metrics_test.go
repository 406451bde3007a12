package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// TestBudgetMetricsAreComputedAtScrapeTime: usage moves with the clock
// for a running environment without any write; series are summed per
// namespace, course and template, with a user label only when asked.
func TestBudgetMetricsAreComputedAtScrapeTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	week := metav1.NewTime(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	end := metav1.NewTime(week.AddDate(0, 0, 7))
	env := func(name, user string, used int64, runningSince *metav1.Time) client.Object {
		ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{v1alpha1.LabelCourse: "db"}},
			Spec: v1alpha1.UserlandSpec{User: user, TemplateRef: v1alpha1.TemplateReference{Name: "lab"}}}
		ul.Status.Usage = &v1alpha1.UsageStatus{PeriodStart: week, PeriodEnd: &end, UsedSeconds: used, LimitSeconds: 36000, RunningSince: runningSince}
		if runningSince != nil {
			ul.Status.Usage.WeightMilli = 1000
		}
		return ul
	}
	reader := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(
		env("a", "alice", 600, &metav1.Time{Time: now.Add(-time.Hour)}), env("b", "bob", 1800, nil),
		&v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "unbudgeted"}},
	).Build()
	clk := testingclock.NewFakePassiveClock(now)

	gather := func(userLabel bool) map[string]float64 {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(newBudgetCollector(reader, clk, userLabel))
		families, err := reg.Gather()
		if err != nil {
			t.Fatalf("gather refused the metrics: %v", err)
		}
		got := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
				got[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = value(m)
			}
		}
		return got
	}
	want := map[string]float64{
		"userland_usage_seconds_total{course=db,namespace=ns,template=lab}":      600 + 3600 + 1800,
		"userland_budget_remaining_seconds{course=db,namespace=ns,template=lab}": 2*36000 - 6000,
	}
	if diff := cmp.Diff(want, gather(false)); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	clk.SetTime(now.Add(time.Hour))
	perUser := gather(true)
	if got := perUser["userland_usage_seconds_total{course=db,namespace=ns,template=lab,user=alice}"]; got != 600+7200 {
		t.Errorf("alice's usage an hour later = %v, want %v (computed on read)", got, 600+7200)
	}
	if got := perUser["userland_usage_seconds_total{course=db,namespace=ns,template=lab,user=bob}"]; got != 1800 {
		t.Errorf("bob's usage, stopped = %v, want 1800", got)
	}
}

func value(m *dto.Metric) float64 {
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}
