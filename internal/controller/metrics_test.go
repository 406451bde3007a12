package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// The phase gauge is counted from a cache at scrape time; what decides
// here is Prometheus's own gather, which refuses a series sent twice. A
// fake client stands in for the cache: nothing of the API server matters.
func TestEnvironmentsByPhaseGatherOnceEachWithUnreconciledCountedAsPending(t *testing.T) {
	t.Parallel()
	withPhase := func(name string, phase v1alpha1.Phase) client.Object {
		ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		ul.Status.Phase = phase
		return ul
	}
	reader := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(
		withPhase("new", ""), withPhase("waiting", v1alpha1.PhasePending),
		withPhase("a", v1alpha1.PhaseReady), withPhase("b", v1alpha1.PhaseReady),
		withPhase("c", v1alpha1.PhaseFailed),
	).Build()
	reg := prometheus.NewPedanticRegistry()
	NewMetrics(reg, reader)

	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather refused the metrics: %v", err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "userland_environments" {
			continue
		}
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetValue()] += m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{"Pending": 2, "Starting": 0, "Ready": 2, "Stopped": 0, "Failed": 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("userland_environments by phase (-want +got):\n%s", diff)
	}
}
