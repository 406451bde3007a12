package controller_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/testobj"
)

// s5UsedStudent makes course art (student s, template lab with a budget
// of two hours a week) and has s's environment use 90 minutes of it.
func s5UsedStudent(t *testing.T, ctrl *running, ctx context.Context, ns string, period v1alpha1.BudgetPeriod) *v1alpha1.Userland {
	t.Helper()
	now := ctrl.clock.Now().Truncate(time.Second)
	create(t, template(ns, "lab", "example.org/lab:1"))
	c := testobj.MakeCourse(ns, "art").Term(now.Add(-time.Hour), now.Add(72*time.Hour)).Students("s@uni.example").
		Template("lab", v1alpha1.ProvisionUpFront).Retention(24*time.Hour, "").Obj()
	// A course governs its students' budgets (budgetOf).
	c.Spec.Limits.Budget = &v1alpha1.BudgetSpec{Hours: 2, Period: period, Weighting: v1alpha1.WeightingNone}
	create(t, c)
	waitCourse(t, ns, "art", "provisioned", func(c *v1alpha1.Course) bool { return c.Status.Provisioned == 1 })
	s := userlandOf(courseUserlands(t, ctx, ns, "art"), "s@uni.example")
	if s == nil {
		t.Fatal("no environment for the student")
	}
	// Course environments start when their user first opens them.
	act(t, ctx, ns, s.Name, actions.Start, ctrl.clock.Now())
	env.WaitPhase(t, ns, s.Name, v1alpha1.PhaseReady)
	for i := 0; ; i++ {
		cur, err := get(t, ctx, ns, s.Name)
		if err == nil && cur.Status.Usage != nil && cur.Status.Usage.RunningSince != nil {
			break
		}
		if i == 40 {
			t.Fatalf("no run recorded: err %v, status %+v, annotations %v", err, cur.Status, cur.Annotations)
		}
		time.Sleep(500 * time.Millisecond)
	}
	ctrl.clock.Step(90 * time.Minute)
	act(t, ctx, ns, s.Name, actions.Stop, ctrl.clock.Now())
	before := waitUsage(t, ns, s.Name, func(u *v1alpha1.UsageStatus) bool { return u.RunningSince == nil && u.UsedSeconds >= 80*60 })
	t.Logf("the student used %d s of %d this week (environment uid %s)", before.Status.Usage.UsedSeconds, before.Status.Usage.LimitSeconds, before.UID)

	return before
}

// TestAdversaryS5CourseManagerRetiresForAFreshBudget: deleting an
// environment that used hours this period takes grant (the webhook asks;
// the controller passes it, holding enroll). A course manager holds no
// grant, but may edit the course's term and retention: they end the term
// a minute ago with a retention of one second, the controller retires
// (deletes) the students' environments, and they move the term back; the
// course makes each environment again with none used, its claim kept.
// Secure: the student's environment still shows this period's use.
func TestAdversaryS5CourseManagerRetiresForAFreshBudget(t *testing.T) {
	ctrl := startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)

	// The course manager's rights (roles.yaml userland-course-manager):
	// patch on courses, no grant; the controller tests run no webhooks, so
	// the test's client stands for them on the course.
	before := s5UsedStudent(t, ctrl, ctx, ns, v1alpha1.BudgetWeek)
	s := before
	// The course manager ends the term a minute ago, retention one second.
	setTerm := func(start, end time.Time, retention time.Duration) {
		t.Helper()
		var c v1alpha1.Course
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "art"}, &c); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(c.DeepCopy())
		c.Spec.Term = v1alpha1.CourseTerm{Start: metav1.NewTime(start), End: metav1.NewTime(end)}
		c.Spec.Lifecycle.Retention = &metav1.Duration{Duration: retention}
		if err := env.Client.Patch(ctx, &c, patch); err != nil {
			t.Fatal(err)
		}
	}
	cnow := ctrl.clock.Now().Truncate(time.Second)
	setTerm(cnow.Add(-3*time.Hour), cnow.Add(-time.Minute), time.Second)
	retired := true
	func() {
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := get(t, ctx, ns, s.Name); err != nil {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		retired = false
	}()
	t.Logf("after the course manager ended the term with 1s retention, the used environment was deleted: %v", retired)
	if !retired {
		return
	}
	// And moves the term back.
	setTerm(cnow.Add(-3*time.Hour), cnow.Add(72*time.Hour), 24*time.Hour)
	var again *v1alpha1.Userland
	env.Eventually(t, 2*time.Minute, "the student's environment made again", func(ctx context.Context) (bool, error) {
		again = userlandOf(courseUserlands(t, ctx, ns, "art"), "s@uni.example")
		return again != nil, nil
	})
	time.Sleep(3 * time.Second)
	again, _ = get(t, ctx, ns, again.Name)
	t.Logf("made again: %s uid %s, usage %+v", again.Name, again.UID, again.Status.Usage)
	if again.UID != before.UID && (again.Status.Usage == nil || again.Status.Usage.UsedSeconds < before.Status.Usage.UsedSeconds) {
		t.Errorf("HOLE: a course manager (patch on courses, no grant) reset a student's budget: ending the term with a 1s retention "+
			"made the controller retire the environment that had used %d s this week (the webhook lets the controller delete, "+
			"it holds enroll), and moving the term back made it again with usage %+v",
			before.Status.Usage.UsedSeconds, again.Status.Usage)
	}
}

// TestAdversaryS5TemplateSwapForASecondBudget: a teaching assistant with
// edit (userland-user-manager: patch on userlands, no grant) points the
// student's used course environment at another template. The course then
// finds no environment of the student's from its template and makes one,
// with a whole budget: the student has the hours again without any
// deletion the webhook would ask about. Secure: no second environment
// with a fresh budget appears (or the swap is refused: the webhook test
// TestAdversaryS5UserManagerSwapsTheTemplateOfAUsedEnvironment).
func TestAdversaryS5TemplateSwapForASecondBudget(t *testing.T) {
	ctrl := startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	before := s5UsedStudent(t, ctrl, ctx, ns, v1alpha1.BudgetWeek)
	create(t, template(ns, "lab2", "example.org/lab:1"))
	ul, err := get(t, ctx, ns, before.Name)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ul.DeepCopy())
	ul.Spec.TemplateRef = v1alpha1.TemplateReference{Name: "lab2"}
	if err := env.Client.Patch(ctx, ul, patch); err != nil {
		t.Fatal(err)
	}
	// The course hears of its Userlands' changes; nudge it all the same.
	var c v1alpha1.Course
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "art"}, &c); err == nil {
		p := client.MergeFrom(c.DeepCopy())
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations["test.userland.dev/poke"] = time.Now().Format(time.RFC3339Nano)
		_ = env.Client.Patch(ctx, &c, p)
	}
	var fresh *v1alpha1.Userland
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) && fresh == nil {
		for _, u := range courseUserlands(t, ctx, ns, "art") {
			if u.Spec.User == "s@uni.example" && u.UID != before.UID {
				fresh = u.DeepCopy()
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if fresh == nil {
		t.Log("no second environment was made for the student after the template swap")
		return
	}
	time.Sleep(3 * time.Second)
	fresh, _ = get(t, ctx, ns, fresh.Name)
	t.Logf("after the swap the course made %s (template %s), usage %+v", fresh.Name, fresh.Spec.TemplateRef.Name, fresh.Status.Usage)
	t.Errorf("HOLE: after a user manager pointed the student's used environment (%d s used) at another template, the course made "+
		"the student a second environment %s with a whole budget; no grant was asked", before.Status.Usage.UsedSeconds, fresh.Name)
}

// TestAdversaryS5CourseManagerShiftsTheTermForAFreshBudget: a course's
// budget for the whole term (period Term) is counted from term.start
// (budget.PeriodAt), and usage of another period start is dropped
// (budget.Advance). A course manager (patch on courses, no grant) moves
// term.start one second: every student's hours are whole again, with no
// deletion for the webhook to ask about. Secure: the hours used stay used.
func TestAdversaryS5CourseManagerShiftsTheTermForAFreshBudget(t *testing.T) {
	ctrl := startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	before := s5UsedStudent(t, ctrl, ctx, ns, v1alpha1.BudgetTerm)
	var c v1alpha1.Course
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "art"}, &c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Term.Start = metav1.NewTime(c.Spec.Term.Start.Add(-time.Second))
	if err := env.Client.Patch(ctx, &c, patch); err != nil {
		t.Fatal(err)
	}
	poke(t, ns, before.Name)
	time.Sleep(3 * time.Second)
	poke(t, ns, before.Name)
	time.Sleep(2 * time.Second)
	after, err := get(t, ctx, ns, before.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("usage before the shift %+v; after %+v", before.Status.Usage, after.Status.Usage)
	if after.Status.Usage == nil || after.Status.Usage.UsedSeconds < before.Status.Usage.UsedSeconds {
		t.Errorf("HOLE: a course manager moved term.start by one second and the student's term budget came back whole "+
			"(used %d s before, usage now %+v): budget.PeriodAt anchors a Term budget at term.start and budget.Advance drops "+
			"usage of another period start", before.Status.Usage.UsedSeconds, after.Status.Usage)
	}
}

// TestAdversaryS5PlantedOwnerLetsTheGarbageCollectorReset: the end of
// the webhook test TestAdversaryS5OwnerReferenceHandsTheDeletionToTheGarbageCollector,
// whose planted ownerReference a user manager's patch gets admitted: the
// real garbage collector (kube-controller-manager) deletes the used
// environment whose owner does not exist, a deletion the webhook's
// matchConditions never send it, and the course makes the environment
// again with none used. Secure: the student's hours stay used.
func TestAdversaryS5PlantedOwnerLetsTheGarbageCollectorReset(t *testing.T) {
	ctrl := startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	before := s5UsedStudent(t, ctrl, ctx, ns, v1alpha1.BudgetWeek)
	ul, err := get(t, ctx, ns, before.Name)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ul.DeepCopy())
	ul.OwnerReferences = append(ul.OwnerReferences, metav1.OwnerReference{
		APIVersion: "v1", Kind: "ConfigMap", Name: "gone", UID: "00000000-0000-0000-0000-00000000dead",
	})
	if err := env.Client.Patch(ctx, ul, patch); err != nil {
		t.Fatal(err)
	}
	var again *v1alpha1.Userland
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && again == nil {
		if u := userlandOf(courseUserlands(t, ctx, ns, "art"), "s@uni.example"); u != nil && u.UID != before.UID {
			again = u
		}
		time.Sleep(time.Second)
	}
	if again == nil {
		t.Log("the garbage collector did not delete the environment (or the course did not make it again) within 90 s")
		return
	}
	time.Sleep(3 * time.Second)
	again, _ = get(t, ctx, ns, again.Name)
	t.Logf("made again after the garbage collector's deletion: %s uid %s, usage %+v", again.Name, again.UID, again.Status.Usage)
	if again.Status.Usage == nil || again.Status.Usage.UsedSeconds < before.Status.Usage.UsedSeconds {
		t.Errorf("HOLE: a planted ownerReference to an absent owner had the garbage collector delete an environment that used %d s "+
			"this week, and the course made it again with usage %+v", before.Status.Usage.UsedSeconds, again.Status.Usage)
	}
}
