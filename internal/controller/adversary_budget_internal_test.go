package controller

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestAdversaryARunStatusMissedStillCounts: the Deployment runs (started
// three hours ago) but status.usage never recorded the start, as when
// every status write of the Userland fails. The run must count from the
// Deployment's start stamp, so a two-hour budget with one hour used stops
// it now, rather than starting the count afresh at this reconcile.
func TestAdversaryARunStatusMissedStillCounts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 7, 10, 0, 0, 0, time.UTC)
	week := budget.Period{Start: time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 10, 12, 0, 0, 0, 0, time.UTC)}
	ul := testobj.MakeUserland("ns", "alice", "alice", "lab").Obj()
	ul.CreationTimestamp = metav1.NewTime(now.Add(-72 * time.Hour))
	ul.Status.LastActivityTime = &metav1.Time{Time: now.Add(-time.Minute)}
	ul.Status.Usage = &v1alpha1.UsageStatus{PeriodStart: metav1.NewTime(week.Start), PeriodEnd: &metav1.Time{Time: week.End},
		UsedSeconds: 3600, LimitSeconds: 7200}
	running := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationStartedAt: stamp(now.Add(-3 * time.Hour))}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1))}}
	d, err := decideRun(RunInput{Now: now, Userland: ul, Deployment: running,
		Budget: &budget.Budget{Period: week, LimitSeconds: 7200, WeightMilli: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Running || d.StopReason != v1alpha1.StoppedBudgetExhausted {
		t.Errorf("HOLE: a run status never recorded is not counted: running %v, stop reason %q, usage %+v", d.Running, d.StopReason, d.Usage)
	}
	if d.Usage == nil || d.Usage.UsedSeconds != 3600+3*3600 {
		t.Errorf("usage %+v, want the three hours since the Deployment's start settled", d.Usage)
	}
}
