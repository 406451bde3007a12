package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/budget"
)

// Deleting an exhausted course environment to have it made again with a
// fresh budget is refused at admission (controller tests run no
// webhooks): internal/webhook/adversary_delete_budget_test.go.

// TestAdversaryAGrantWhoseBylineStatusCannotHoldDoesNotUnlockForever: the
// grant annotation's "by" part is free text, but status.usage.grantedBy
// holds at most 256 characters. A granter (or a dashboard user with a
// long name) whose grant names a longer "by" makes every status write of
// the Userland fail; usage is then never persisted, and a run started
// after the grant restarts its count at every reconcile. One hour granted
// must still mean one hour.
func TestAdversaryAGrantWhoseBylineStatusCannotHoldDoesNotUnlockForever(t *testing.T) {
	ctrl := startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	weekStart := budget.WeekStart(ctrl.clock.Now())
	if left := weekStart.AddDate(0, 0, 7).Sub(ctrl.clock.Now()); left < 12*time.Hour {
		ctrl.clock.Step(left + time.Hour)
	}
	tmpl := template(ns, "t", "example.org/app:1")
	tmpl.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 1, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	create(t, tmpl, userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	waitUsage(t, ns, "u", func(u *v1alpha1.UsageStatus) bool { return u.RunningSince != nil })
	ctrl.clock.Step(61 * time.Minute)
	poke(t, ns, "u")
	ul := waitStopped(t, ns, "u", v1alpha1.StoppedBudgetExhausted)

	// One hour more, "by" a name of 300 characters (the webhook admits
	// any text there; this test's client stands for the granter).
	grant, err := budget.AddGrant("", ul.Status.Usage.PeriodStart.Time, 1, strings.Repeat("g", 300))
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ul.DeepCopy())
	ul.Annotations[v1alpha1.AnnotationBudgetGrant] = grant
	if err := env.Client.Patch(ctx, ul, patch); err != nil {
		t.Fatal(err)
	}
	act(t, ctx, ns, "u", actions.Start, ctrl.clock.Now())
	time.Sleep(3 * time.Second)
	// Four hours on, reconciled along the way as timers would.
	for range 8 {
		ctrl.clock.Step(30 * time.Minute)
		poke(t, ns, "u")
		time.Sleep(time.Second)
	}
	time.Sleep(2 * time.Second)
	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "u"}, &dep); err != nil {
		t.Fatal(err)
	}
	got, _ := get(t, ctx, ns, "u")
	if dep.Spec.Replicas != nil && *dep.Spec.Replicas > 0 {
		t.Errorf("HOLE: one hour granted, yet after four more hours the environment still runs (replicas %d; status phase %s, usage %+v): "+
			"a grant whose 'by' status cannot hold stops usage being persisted, so the run's count restarts at each reconcile",
			*dep.Spec.Replicas, got.Status.Phase, got.Status.Usage)
	}
}
