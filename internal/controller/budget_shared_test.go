package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestACoursesBudgetIsTheStudentsNotEachEnvironments: a student with two
// of a course's templates has one budget for both. Both running, an hour
// lasts half an hour; once it is used up neither starts, while another
// student's hour is untouched. Time moves on the controller's clock.
func TestACoursesBudgetIsTheStudentsNotEachEnvironments(t *testing.T) {
	ctrl := startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := testobj.MakeCourse(ns, "db").Students("alice@uni.example", "bob@uni.example").
		Template("editor", v1alpha1.ProvisionUpFront).Template("database", v1alpha1.ProvisionUpFront).Obj()
	c.Spec.Limits.Budget = &v1alpha1.BudgetSpec{Hours: 1, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	create(t, template(ns, "editor", "example.org/editor:1"), template(ns, "database", "example.org/db:1"), c)
	waitCourse(t, ns, "db", "provisioned", func(c *v1alpha1.Course) bool { return c.Status.Provisioned == 2 }) // students with every template
	names := map[string]map[string]string{}                                                                    // user → template → Userland
	for _, ul := range courseUserlands(t, ctx, ns, "db") {
		if names[ul.Spec.User] == nil {
			names[ul.Spec.User] = map[string]string{}
		}
		names[ul.Spec.User][ul.Spec.TemplateRef.Name] = ul.Name
	}
	alice, bob := names["alice@uni.example"], names["bob@uni.example"]
	if len(alice) != 2 || len(bob) != 2 {
		t.Fatalf("environments per student = %v, want an editor and a database each", names)
	}
	// Stay clear of a weekly rollover while the clock moves.
	if left := budget.WeekStart(ctrl.clock.Now()).AddDate(0, 0, 7).Sub(ctrl.clock.Now()); left < 2*time.Hour {
		ctrl.clock.Step(left + time.Minute)
	}

	for _, name := range []string{alice["editor"], alice["database"], bob["editor"]} {
		act(t, ctx, ns, name, actions.Start, ctrl.clock.Now())
	}
	for _, name := range []string{alice["editor"], alice["database"], bob["editor"]} {
		env.WaitPhase(t, ns, name, v1alpha1.PhaseReady)
		waitUsage(t, ns, name, func(u *v1alpha1.UsageStatus) bool { return u.RunningSince != nil })
	}

	// Thirty-one minutes of both: alice's hour is gone, bob's is not.
	ctrl.clock.Step(31 * time.Minute)
	for _, name := range []string{alice["editor"], alice["database"], bob["editor"]} {
		poke(t, ns, name)
	}
	var used int64
	for _, name := range []string{alice["editor"], alice["database"]} {
		ul := waitStopped(t, ns, name, v1alpha1.StoppedBudgetExhausted)
		used += ul.Status.Usage.UsedSeconds
	}
	assertAround(t, "alice's two environments' use together", used, 62*60)
	ul := env.WaitPhase(t, ns, bob["editor"], v1alpha1.PhaseReady)
	assertAround(t, "bob's editor's use, computed on read", budget.Used(ul.Status.Usage, ctrl.clock.Now()), 31*60)

	// Neither of alice's starts again, the one she had not used either.
	ctrl.clock.Step(time.Minute)
	act(t, ctx, ns, alice["database"], actions.Start, ctrl.clock.Now())
	time.Sleep(2 * time.Second)
	waitStopped(t, ns, alice["database"], v1alpha1.StoppedBudgetExhausted)
	// Bob's database draws on his own hour: 31 minutes used, so it starts.
	act(t, ctx, ns, bob["database"], actions.Start, ctrl.clock.Now())
	env.WaitPhase(t, ns, bob["database"], v1alpha1.PhaseReady)
}
