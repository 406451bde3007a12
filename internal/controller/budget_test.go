package controller_test

import (
	"context"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/budget"
)

// TestBudgetAccountingAcrossStopStartRestartAndExhaustion: usage is kept
// from start and stop times across a stop, a start and a controller
// restart (the persisted runningSince carries the run over), the
// environment is stopped as BudgetExhausted once the budget runs out and
// refuses to start, and a grant lets it start again, each recorded in an
// event. Time moves on the controller's clock; nothing waits for it.
func TestBudgetAccountingAcrossStopStartRestartAndExhaustion(t *testing.T) {
	ctrl := startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	tmpl := template(ns, "t", "example.org/app:1")
	tmpl.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 1, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	create(t, tmpl, userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	ul := waitUsage(t, ns, "u", func(u *v1alpha1.UsageStatus) bool { return u.RunningSince != nil })
	if u := ul.Status.Usage; u.UsedSeconds != 0 || u.LimitSeconds != 3600 || u.WeightMilli != 1000 ||
		!u.PeriodStart.Time.Equal(budget.WeekStart(ctrl.clock.Now())) {
		t.Fatalf("usage at the start = %+v, want a fresh hour this week, running", u)
	}

	// Running does not write: a reconcile (poked) finds nothing to change.
	before := ctrl.writes.statusWrites(ns)
	poke(t, ns, "u")
	time.Sleep(2 * time.Second)
	if n := ctrl.writes.statusWrites(ns) - before; n != 0 {
		t.Errorf("a running environment's reconcile wrote its status %d times, want 0", n)
	}

	// Twenty minutes on, stopped: the run is settled in status.
	ctrl.clock.Step(20 * time.Minute)
	act(t, ctx, ns, "u", actions.Stop, ctrl.clock.Now())
	ul = waitUsage(t, ns, "u", func(u *v1alpha1.UsageStatus) bool { return u.RunningSince == nil })
	assertAround(t, "used after 20 minutes", ul.Status.Usage.UsedSeconds, 20*60)

	// Started again, then the controller is stopped for half an hour.
	act(t, ctx, ns, "u", actions.Start, ctrl.clock.Now())
	waitUsage(t, ns, "u", func(u *v1alpha1.UsageStatus) bool { return u.RunningSince != nil })
	offset := time.Until(ctrl.clock.Now())
	ctrl.stop()
	ctrl = startController(t)
	ctrl.clock.Step(offset + 30*time.Minute)
	poke(t, ns, "u")
	time.Sleep(2 * time.Second)
	ul, err := get(t, ctx, ns, "u")
	if err != nil {
		t.Fatal(err)
	}
	assertAround(t, "used after the restart, computed on read", budget.Used(ul.Status.Usage, ctrl.clock.Now()), 50*60)
	if ul.Status.Phase != v1alpha1.PhaseReady {
		t.Fatalf("phase %s after 50 of 60 minutes, want Ready", ul.Status.Phase)
	}

	// Past the hour: stopped as BudgetExhausted, and a start is refused.
	ctrl.clock.Step(11 * time.Minute)
	poke(t, ns, "u")
	ul = waitStopped(t, ns, "u", v1alpha1.StoppedBudgetExhausted)
	if left := budget.Remaining(ul.Status.Usage, ctrl.clock.Now()); left > 0 {
		t.Errorf("remaining %d s once exhausted, want none", left)
	}
	waitEvent(t, ns, "u", v1alpha1.ReasonBudgetExhausted)
	ctrl.clock.Step(time.Minute)
	act(t, ctx, ns, "u", actions.Start, ctrl.clock.Now())
	time.Sleep(2 * time.Second)
	waitStopped(t, ns, "u", v1alpha1.StoppedBudgetExhausted)

	// Staff grant two hours: the start asked for goes ahead.
	ul, _ = get(t, ctx, ns, "u")
	grant, err := budget.AddGrant(ul.Annotations[v1alpha1.AnnotationBudgetGrant], ul.Status.Usage.PeriodStart.Time, 2, "teacher")
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ul.DeepCopy())
	ul.Annotations[v1alpha1.AnnotationBudgetGrant] = grant
	if err := env.Client.Patch(ctx, ul, patch); err != nil {
		t.Fatal(err)
	}
	ul = env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	if u := ul.Status.Usage; u.GrantedSeconds != 7200 || u.GrantedBy != "teacher" {
		t.Errorf("usage after the grant = %+v, want 7200 s granted by teacher", u)
	}
	waitEvent(t, ns, "u", "BudgetGranted")

	// Next Monday the week rolls over: usage restarts at zero.
	next := budget.WeekStart(ctrl.clock.Now()).AddDate(0, 0, 7)
	ctrl.clock.Step(next.Sub(ctrl.clock.Now()) + time.Minute)
	poke(t, ns, "u")
	ul = waitUsage(t, ns, "u", func(u *v1alpha1.UsageStatus) bool { return u.PeriodStart.Time.Equal(next) })
	if u := ul.Status.Usage; u.UsedSeconds != 0 || u.GrantedSeconds != 0 || u.RunningSince == nil || !u.RunningSince.Time.Equal(next) {
		t.Errorf("usage after the rollover = %+v, want a fresh week running since its start, without last week's grant", u)
	}
}

func act(t *testing.T, ctx context.Context, ns, name string, verb actions.Verb, now time.Time) {
	t.Helper()
	ul, err := get(t, ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := actions.Patch(verb, actions.Staff, ul, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(ctx, ul, patch); err != nil {
		t.Fatal(err)
	}
}

func waitUsage(t *testing.T, ns, name string, ok func(*v1alpha1.UsageStatus) bool) *v1alpha1.Userland {
	t.Helper()
	var ul *v1alpha1.Userland
	env.Eventually(t, 30*time.Second, "usage", func(ctx context.Context) (bool, error) {
		var err error
		ul, err = get(t, ctx, ns, name)
		return err == nil && ul.Status.Usage != nil && ok(ul.Status.Usage), err
	})
	return ul
}

func waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	env.Eventually(t, 30*time.Second, reason+" event", func(ctx context.Context) (bool, error) {
		var events eventsv1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == reason && e.Regarding.Name == name {
				return true, nil
			}
		}
		return false, nil
	})
}

// assertAround allows the real seconds the test itself takes.
func assertAround(t *testing.T, what string, got, want int64) {
	t.Helper()
	if got < want || got > want+30 {
		t.Errorf("%s = %d s, want %d s (up to 30 s more)", what, got, want)
	}
}

// TestBudgetsWriteNothingInSteadyStateAndOncePerEnvironmentAtRollover:
// running budgeted environments cost no write while they run; at the
// weekly rollover each running one gets exactly one status write (its
// usage starting afresh), and nothing else is written.
func TestBudgetsWriteNothingInSteadyStateAndOncePerEnvironmentAtRollover(t *testing.T) {
	ctrl := startController(t)
	ns := env.Namespace(t)
	tmpl := template(ns, "t", "example.org/app:1")
	tmpl.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 40, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	create(t, tmpl)
	names := []string{"a", "b", "c", "d", "e"}
	for _, n := range names {
		create(t, userland(ns, n, "user-"+n, "t"))
	}
	for _, n := range names {
		env.WaitPhase(t, ns, n, v1alpha1.PhaseReady)
		waitUsage(t, ns, n, func(u *v1alpha1.UsageStatus) bool { return u.RunningSince != nil })
	}
	env.Eventually(t, 30*time.Second, "the template counted five ready", func(ctx context.Context) (bool, error) {
		var tm v1alpha1.Template
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "t"}, &tm)
		return err == nil && tm.Status.ReadyUserlands == 5, err
	})
	time.Sleep(time.Second)
	before := ctrl.writes.count(ns)
	// Hours of running, within the week (short of its end on a Sunday night).
	weekEnd := budget.WeekStart(ctrl.clock.Now()).AddDate(0, 0, 7)
	ctrl.clock.Step(min(3*time.Hour, weekEnd.Sub(ctrl.clock.Now())-time.Minute))
	for _, n := range names {
		poke(t, ns, n)
	}
	time.Sleep(5 * time.Second)
	if writes := ctrl.writes.count(ns) - before; writes != 0 {
		t.Errorf("the controller wrote %d times while budgeted environments ran, want 0: %v", writes, ctrl.writes.requestsTo(ns))
	}

	// Next Monday 00:00 UTC: the timer each set fires (poked here, as the
	// clock is moved, not waited for).
	next := budget.WeekStart(ctrl.clock.Now()).AddDate(0, 0, 7)
	ctrl.clock.Step(next.Sub(ctrl.clock.Now()) + time.Second)
	statusBefore := ctrl.writes.statusWrites(ns)
	for _, n := range names {
		poke(t, ns, n)
	}
	for _, n := range names {
		waitUsage(t, ns, n, func(u *v1alpha1.UsageStatus) bool { return u.PeriodStart.Time.Equal(next) })
	}
	time.Sleep(3 * time.Second)
	if got := ctrl.writes.statusWrites(ns) - statusBefore; got != len(names) {
		t.Errorf("%d status writes at the rollover of %d running environments, want one each", got, len(names))
	}
}
