package controller_test

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/describe"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestAdversaryPoolSiblingsAndPeriods attacks the shared budget from the
// controller's side:
//   - the watch: when one of a student's environments stops for the
//     budget, the other (running, not poked) is re-decided and stops too,
//     instead of running on until its own, stale deadline;
//   - a grant on one environment lets the other start;
//   - last week's use and last week's grant of a sibling left unreconciled
//     in status neither drain nor extend this week's budget;
//   - an environment with the course's label, the same user, and a
//     provenance naming another course UID (a same-named course of
//     before) does not join the pool.
func TestAdversaryPoolSiblingsAndPeriods(t *testing.T) {
	ctrl := startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := testobj.MakeCourse(ns, "db").Students("alice@uni.example").
		Template("editor", v1alpha1.ProvisionUpFront).Template("database", v1alpha1.ProvisionUpFront).Obj()
	c.Spec.Limits.Budget = &v1alpha1.BudgetSpec{Hours: 1, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	stray := template(ns, "stray", "example.org/stray:1")
	stray.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 5, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	create(t, template(ns, "editor", "example.org/editor:1"), template(ns, "database", "example.org/db:1"), stray, c)
	waitCourse(t, ns, "db", "provisioned", func(c *v1alpha1.Course) bool { return c.Status.Provisioned == 1 })
	names := map[string]string{}
	for _, ul := range courseUserlands(t, ctx, ns, "db") {
		names[ul.Spec.TemplateRef.Name] = ul.Name
	}
	editor, database := names["editor"], names["database"]
	if editor == "" || database == "" {
		t.Fatalf("alice's environments = %v, want an editor and a database", names)
	}
	// A stray environment of alice's carrying the course's label and a
	// provenance from another (earlier, same-named) course: with its
	// template's budget of 5h, running; it must not be pooled.
	strayUL := userland(ns, "alice-stray", "alice@uni.example", "stray")
	strayUL.Labels = map[string]string{v1alpha1.LabelCourse: "db"}
	strayUL.Annotations = map[string]string{v1alpha1.AnnotationProvisionedByCourse: "00000000-0000-0000-0000-000000000000"}
	create(t, strayUL)

	// Clear of a weekly rollover while the clock moves.
	if left := budget.WeekStart(ctrl.clock.Now()).AddDate(0, 0, 7).Sub(ctrl.clock.Now()); left < 3*time.Hour {
		ctrl.clock.Step(left + time.Minute)
	}
	for _, name := range []string{editor, database} {
		act(t, ctx, ns, name, actions.Start, ctrl.clock.Now())
	}
	for _, name := range []string{editor, database, "alice-stray"} {
		env.WaitPhase(t, ns, name, v1alpha1.PhaseReady)
		waitUsage(t, ns, name, func(u *v1alpha1.UsageStatus) bool { return u.RunningSince != nil })
	}

	// 31 minutes of both; only the editor is looked at. The database must
	// follow through the watch on the editor's usage.
	ctrl.clock.Step(31 * time.Minute)
	poke(t, ns, editor)
	waitStopped(t, ns, editor, v1alpha1.StoppedBudgetExhausted)
	waitStopped(t, ns, database, v1alpha1.StoppedBudgetExhausted)
	// The stray one, outside the pool, runs on (31 minutes of its 5h).
	poke(t, ns, "alice-stray")
	time.Sleep(2 * time.Second)
	if ul := env.WaitPhase(t, ns, "alice-stray", v1alpha1.PhaseReady); ul.Status.StoppedReason != "" {
		t.Errorf("the stray environment stopped: %s", ul.Status.StoppedReason)
	}

	// A grant of an hour on the database lets the editor start.
	var crs v1alpha1.Course
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &crs); err != nil {
		t.Fatal(err)
	}
	db, err := get(t, ctx, ns, database)
	if err != nil {
		t.Fatal(err)
	}
	if err := actions.Grant(ctx, env.Client, env.Client, db, &crs, nil, 1, "ta", ctrl.clock.Now()); err != nil {
		t.Fatal(err)
	}
	waitUsage(t, ns, database, func(u *v1alpha1.UsageStatus) bool { return u.GrantedSeconds == 3600 })
	act(t, ctx, ns, editor, actions.Start, ctrl.clock.Now())
	env.WaitPhase(t, ns, editor, v1alpha1.PhaseReady)
	// Stop it again, and leave the database (with last week's grant and
	// use, once the week turns) unreconciled.
	act(t, ctx, ns, editor, actions.Stop, ctrl.clock.Now())
	env.Eventually(t, 30*time.Second, "the editor stopped", func(ctx context.Context) (bool, error) {
		ul, err := get(t, ctx, ns, editor)
		return err == nil && ul.Status.Phase == v1alpha1.PhaseStopped && ul.Status.Usage != nil && ul.Status.Usage.RunningSince == nil, err
	})

	// Next week: a whole hour again, no more.
	next := budget.WeekStart(ctrl.clock.Now()).AddDate(0, 0, 7)
	ctrl.clock.Step(next.Sub(ctrl.clock.Now()) + time.Minute)
	act(t, ctx, ns, editor, actions.Start, ctrl.clock.Now())
	env.WaitPhase(t, ns, editor, v1alpha1.PhaseReady)
	ctrl.clock.Step(50 * time.Minute)
	poke(t, ns, editor)
	time.Sleep(2 * time.Second)
	if ul, _ := get(t, ctx, ns, editor); ul.Status.Phase != v1alpha1.PhaseReady {
		t.Fatalf("50 minutes into a new week the editor is %s (%s): last week's use of its sibling counted", ul.Status.Phase, ul.Status.StoppedReason)
	}
	ctrl.clock.Step(11 * time.Minute)
	poke(t, ns, editor)
	waitStopped(t, ns, editor, v1alpha1.StoppedBudgetExhausted)
}

// TestAdversaryPoolAfterTheCourseIsDeleted: a course with a budget made
// alice an editor and a database; the course is deleted ("its Userlands
// become plain ones") and each environment falls back to its template's
// budget (1h each), enforced per environment. Its label and provenance
// stay, so course.BudgetSharing still groups the two: what the pages,
// kubectl userland course and the metric show (describe.Usage with
// sharing.Of) must be what the controller enforces.
func TestAdversaryPoolAfterTheCourseIsDeleted(t *testing.T) {
	ctrl := startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := testobj.MakeCourse(ns, "db").Students("alice@uni.example").
		Template("editor", v1alpha1.ProvisionUpFront).Template("database", v1alpha1.ProvisionUpFront).Obj()
	c.Spec.Limits.Budget = &v1alpha1.BudgetSpec{Hours: 1, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	ed, dbt := template(ns, "editor", "example.org/editor:1"), template(ns, "database", "example.org/db:1")
	for _, tm := range []*v1alpha1.Template{ed, dbt} {
		tm.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 1, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	}
	create(t, ed, dbt, c)
	waitCourse(t, ns, "db", "provisioned", func(c *v1alpha1.Course) bool { return c.Status.Provisioned == 1 })
	names := map[string]string{}
	for _, ul := range courseUserlands(t, ctx, ns, "db") {
		names[ul.Spec.TemplateRef.Name] = ul.Name
	}
	editor, database := names["editor"], names["database"]
	if editor == "" || database == "" {
		t.Fatalf("alice's environments = %v", names)
	}
	if left := budget.WeekStart(ctrl.clock.Now()).AddDate(0, 0, 7).Sub(ctrl.clock.Now()); left < 3*time.Hour {
		ctrl.clock.Step(left + time.Minute)
	}
	if err := env.Client.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, 30*time.Second, "the course gone", func(ctx context.Context) (bool, error) {
		var got v1alpha1.Course
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &got)
		return err != nil, nil
	})
	// Five hours granted on the editor, under its template's budget.
	edUL, err := get(t, ctx, ns, editor)
	if err != nil {
		t.Fatal(err)
	}
	if err := actions.Grant(ctx, env.Client, env.Client, edUL, nil, &ed.Spec, 5, "root", ctrl.clock.Now()); err != nil {
		t.Fatal(err)
	}
	waitUsage(t, ns, editor, func(u *v1alpha1.UsageStatus) bool { return u.GrantedSeconds == 5*3600 })
	// The database runs 61 minutes: its own hour is gone and it stops.
	act(t, ctx, ns, database, actions.Start, ctrl.clock.Now())
	env.WaitPhase(t, ns, database, v1alpha1.PhaseReady)
	waitUsage(t, ns, database, func(u *v1alpha1.UsageStatus) bool { return u.RunningSince != nil })
	ctrl.clock.Step(61 * time.Minute)
	poke(t, ns, database)
	waitStopped(t, ns, database, v1alpha1.StoppedBudgetExhausted)

	// What a page shows for the database, from the same statuses.
	var list v1alpha1.UserlandList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	sharing := course.NewBudgetSharing(course.Pointers(list.Items), course.Remembered(func(namespace, name string) (*v1alpha1.Course, error) {
		var c v1alpha1.Course
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &c)
		return &c, err
	}))
	for i := range list.Items {
		ul := &list.Items[i]
		if ul.Name != database {
			continue
		}
		shown := describe.Usage(ul.Status.Usage, sharing.Of(ul), ctrl.clock.Now())
		own := describe.Usage(ul.Status.Usage, nil, ctrl.clock.Now())
		if shown != own {
			t.Errorf("the database, stopped BudgetExhausted under its own 1h, is shown as %q (pooled with the editor's grant, by a course that no longer exists); the controller enforces %q", shown, own)
		}
	}
}
