package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestGrantAddsHoursForTheCurrentWeek: kubectl userland grant adds to
// the student's grant for this week, names the caller as the API server
// knows them, and refuses a course without a budget or a student without
// an environment. (Who may grant is the webhook's: TestOnlyGrantersGrantBudget.)
func TestGrantAddsHoursForTheCurrentWeek(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	crs := testobj.MakeCourse(ns, "db").Students("a@uni.example").Template("lab", v1alpha1.ProvisionUpFront).Obj()
	crs.Spec.Limits.Budget = &v1alpha1.BudgetSpec{Hours: 10, Period: v1alpha1.BudgetWeek}
	mustCreate(t, testobj.MakeTemplate(ns, "lab").Obj(), crs, testobj.MakeCourse(ns, "free").Template("lab", v1alpha1.ProvisionUpFront).Obj())
	ul := course.NewUserland(crs, "a@uni.example", course.BasisStudentUser, v1alpha1.TemplateReference{Name: "lab"})
	ul.Name = "a-lab"
	mustCreate(t, ul)

	for _, h := range []string{"3", "2"} {
		if out, _, err := kubectl(t, "-n", ns, "grant", "db", "a@uni.example", "--hours", h); err != nil || !strings.Contains(out, "a-lab granted "+h+" more hours") {
			t.Fatalf("grant %s: %q, %v", h, out, err)
		}
	}
	got, g := grantOn(ctx, t, ns, "a-lab")
	if !g.PeriodStart.Equal(budget.WeekStart(time.Now())) || g.Hours != 5 || g.By == "" {
		t.Errorf("grant after 3 and 2 hours = %+v, want 5 hours this week by the caller", g)
	}

	// course status shows the budget and, from status, each one's use.
	got.Status.Usage = &v1alpha1.UsageStatus{PeriodStart: metav1.NewTime(g.PeriodStart), PeriodEnd: &metav1.Time{Time: g.PeriodStart.AddDate(0, 0, 7)},
		UsedSeconds: 3600, LimitSeconds: 36000, GrantedSeconds: 5 * 3600}
	if err := env.Client.Status().Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	out, _, err := kubectl(t, "-n", ns, "course", "status", "db")
	if err != nil || !strings.Contains(out, "Budget:   10 hours per student per week (weighting None)") || !strings.Contains(out, "1h used of 15h, 14h left") {
		t.Errorf("course status (%v):\n%s", err, out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"grant", "free", "a@uni.example", "--hours", "1"}, "has no budget"},
		{[]string{"grant", "db", "nobody@uni.example", "--hours", "1"}, "no environment of student"},
		{[]string{"grant", "db", "a@uni.example", "--hours", "0"}, "want a positive number"},
	} {
		if _, _, err := kubectl(t, append([]string{"-n", ns}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// TestGrantOneEnvironmentOutsideACourse: --userland grants under the
// environment's template budget, and refuses one no budget governs, a
// missing one, and positional arguments beside it.
func TestGrantOneEnvironmentOutsideACourse(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	metered := testobj.MakeTemplate(ns, "metered").Obj()
	metered.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 4, Period: v1alpha1.BudgetWeek}
	mustCreate(t, metered, testobj.MakeTemplate(ns, "free").Obj(),
		testobj.MakeUserland(ns, "m", "m@uni.example", "metered").Obj(), testobj.MakeUserland(ns, "f", "f@uni.example", "free").Obj())

	out, _, err := kubectl(t, "-n", ns, "grant", "--userland", "m", "--hours", "2")
	if err != nil || !strings.Contains(out, "m granted 2 more hours") {
		t.Fatalf("grant --userland m: %q, %v", out, err)
	}
	if _, g := grantOn(ctx, t, ns, "m"); !g.PeriodStart.Equal(budget.WeekStart(time.Now())) || g.Hours != 2 || g.By == "" {
		t.Errorf("grant = %+v, want 2 hours this week by the caller", g)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"grant", "--userland", "f", "--hours", "1"}, "no compute-hour budget governs"},
		{[]string{"grant", "--userland", "gone", "--hours", "1"}, "not found"},
		{[]string{"grant", "db", "a@uni.example", "--userland", "m", "--hours", "1"}, "unknown command"},
	} {
		if _, _, err := kubectl(t, append([]string{"-n", ns}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// TestGrantSurvivesTheControllersStatusWrite: a grant prepared from a read
// that the controller's status write (or another grant) has since
// overtaken is a conflict on the real API server. actions.Grant, which the
// dashboard and this plugin share, reads again and adds to the total it
// finds, so no grant is lost and no person sees "the object has been
// modified". A same-named successor is not granted what its predecessor
// was checked for.
func TestGrantSurvivesTheControllersStatusWrite(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	tmpl := testobj.MakeTemplate(ns, "lab").Obj()
	tmpl.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 1, Period: v1alpha1.BudgetWeek}
	mustCreate(t, tmpl, testobj.MakeUserland(ns, "a-lab", "a@uni.example", "lab").Obj())
	var stale v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a-lab"}, &stale); err != nil {
		t.Fatal(err)
	}
	// Another grant and a status write land after the read.
	if err := actions.Grant(ctx, env.Client, env.Client, stale.DeepCopy(), nil, &tmpl.Spec, 2, "ta", time.Now()); err != nil {
		t.Fatal(err)
	}
	var moved v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a-lab"}, &moved); err != nil {
		t.Fatal(err)
	}
	moved.Status.Phase = v1alpha1.PhaseStopped
	if err := env.Client.Status().Update(ctx, &moved); err != nil {
		t.Fatal(err)
	}
	if err := actions.Grant(ctx, env.Client, env.Client, stale.DeepCopy(), nil, &tmpl.Spec, 3, "root", time.Now()); err != nil {
		t.Fatalf("a grant from a read the status write overtook: %v", err)
	}
	got, g := grantOn(ctx, t, ns, "a-lab")
	if g.Hours != 5 || g.By != "root" {
		t.Errorf("grant after 2 and then 3 hours from a stale read = %+v, want 5 hours, last by root", g)
	}

	// The name deleted and made again: the checked object is gone.
	if err := env.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, testobj.MakeUserland(ns, "a-lab", "b@uni.example", "lab").Obj())
	err := actions.Grant(ctx, env.Client, env.Client, got.DeepCopy(), nil, &tmpl.Spec, 1, "root", time.Now())
	if !apierrors.IsNotFound(err) {
		t.Errorf("a grant for the deleted environment on its successor: %v, want NotFound", err)
	}
	var successor v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a-lab"}, &successor); err != nil {
		t.Fatal(err)
	}
	if v, ok := successor.Annotations[v1alpha1.AnnotationBudgetGrant]; ok {
		t.Errorf("the successor was granted %q", v)
	}
}

// grantOn reads Userland ns/name from the API server and the grant it
// records.
func grantOn(ctx context.Context, t *testing.T, ns, name string) (*v1alpha1.Userland, budget.Grant) {
	t.Helper()
	var got v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &got); err != nil {
		t.Fatal(err)
	}
	g, err := budget.ParseGrant(got.Annotations[v1alpha1.AnnotationBudgetGrant])
	if err != nil {
		t.Fatalf("the grant on %s/%s: %v", ns, name, err)
	}
	return &got, g
}
