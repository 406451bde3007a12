package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// A write the API server refuses (here a ResourceQuota's admission denies
// the Deployment) makes Ready False with the reason and what failed, not
// only a logged error; once the cause is gone the environment comes up.
func TestARefusedWriteMakesReadyFalseWithTheCauseThenRecovers(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ns := env.Namespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-deployments"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/deployments.apps": resource.MustParse("0")}},
	}
	create(t, quota, template(ns, "t", "example.org/app:1"), userland(ns, "u", "alice", "t"))

	var seen *metav1.Condition
	env.Eventually(t, 30*time.Second, "Ready=False ReconcileFailed naming the refused Deployment", func(ctx context.Context) (bool, error) {
		ul, err := get(t, ctx, ns, "u")
		if err != nil {
			return false, err
		}
		seen = condition(ul, v1alpha1.ConditionReady)
		return seen != nil && seen.Status == metav1.ConditionFalse && seen.Reason == v1alpha1.ReasonReconcileFailed &&
			strings.Contains(seen.Message, "Deployment") && strings.Contains(seen.Message, "quota"), nil
	})
	t.Logf("while refused: Ready=%s %s: %s", seen.Status, seen.Reason, seen.Message)

	if err := env.Client.Delete(context.Background(), quota); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ul := env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	if c := condition(ul, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonReady {
		t.Errorf("after the quota went: Ready %+v, want True (Ready)", c)
	}
	if ul.Status.ObservedGeneration != ul.Generation {
		t.Errorf("observedGeneration %d, want %d once reconciled", ul.Status.ObservedGeneration, ul.Generation)
	}
	t.Logf("Ready %s after the quota was deleted (the queue's backoff)", time.Since(start).Round(time.Millisecond))
}
