package webhook_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestAdversaryTodayNamesakeCourseReachesNothingOld: a course is deleted
// and a course manager makes a new Course of the same name (new UID). A
// teaching assistant with edit on Userlands and a Role granting the verb
// grant on courses/<that name> legitimately grants on what the NEW course
// made, but must not reach the environment the OLD course made (its
// label still names the course; its provenance holds the old UID), which
// has used hours: no grant annotation, no deletion (a fresh budget), no
// owner reference (a garbage-collected deletion), no template swap.
func TestAdversaryTodayNamesakeCourseReachesNothingOld(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	lab := compliant(ns, "lab")
	lab.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 2, Period: v1alpha1.BudgetWeek}
	budgeted := &v1alpha1.BudgetSpec{Hours: 3, Period: v1alpha1.BudgetWeek}
	old := testobj.MakeCourse(ns, "ghost").Students("s@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	old.Spec.Limits.Budget = budgeted
	for _, o := range []client.Object{lab, compliant(ns, "other"), old} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	left := course.NewUserland(old, "s@uni.example", course.BasisStudentUser, v1alpha1.TemplateReference{Name: "lab"})
	left.Name = "s-lab-ghost"
	if err := env.Client.Create(ctx, left); err != nil {
		t.Fatal(err)
	}
	week := budget.WeekStart(time.Now())
	patch := client.MergeFrom(left.DeepCopy())
	left.Status.Usage = &v1alpha1.UsageStatus{PeriodStart: metav1.NewTime(week), PeriodEnd: &metav1.Time{Time: week.AddDate(0, 0, 7)},
		UsedSeconds: 3600, LimitSeconds: 7200}
	if err := env.Client.Status().Patch(ctx, left, patch); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, 30*time.Second, "the old course gone", func(ctx context.Context) (bool, error) {
		var c v1alpha1.Course
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), &c)
		return err != nil, nil
	})
	namesake := testobj.MakeCourse(ns, "ghost").Students("s@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	namesake.Spec.Limits.Budget = budgeted
	if err := env.Client.Create(ctx, namesake); err != nil {
		t.Fatal(err)
	}
	if namesake.UID == old.UID {
		t.Fatal("the namesake has the old UID")
	}
	made := course.NewUserland(namesake, "s@uni.example", course.BasisStudentUser, v1alpha1.TemplateReference{Name: "lab"})
	made.Name = "s-lab-ghost-2"
	if err := env.Client.Create(ctx, made); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grant-ghost"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"courses"},
			ResourceNames: []string{"ghost"}, Verbs: []string{v1alpha1.VerbGrant}}},
	}
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	ta := clientAs(t, ns, "ta@uni.example", clusterRole("userland-user-manager"))
	clientAs(t, ns, "ta@uni.example", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "grant-ghost"})
	waitAuthorized(t, ta, &v1alpha1.UserlandList{}, client.InNamespace(ns))
	grantKey := v1alpha1.AnnotationBudgetGrant
	value := week.UTC().Format(time.RFC3339) + "=5;ta@uni.example"

	// Control: the Role works on what the namesake made (so the refusals
	// below are about provenance, not a broken binding or a lagging cache).
	env.Eventually(t, 30*time.Second, "the assistant's grant on the namesake's environment", func(ctx context.Context) (bool, error) {
		return patchUserland(ctx, ta, ns, made.Name, func(ul *v1alpha1.Userland) { ul.Annotations[grantKey] = value }) == nil, nil
	})

	if err := patchUserland(ctx, ta, ns, left.Name, func(ul *v1alpha1.Userland) { ul.Annotations[grantKey] = value }); err == nil {
		t.Error("HOLE: grant on a namesake course granted hours to the deleted course's environment")
	} else if !strings.Contains(err.Error(), "userlands.userland.dev "+left.Name) {
		t.Errorf("grant refused, but not as asking grant on the Userland: %v", err)
	}
	if err := patchUserland(ctx, ta, ns, left.Name, func(ul *v1alpha1.Userland) {
		ul.Spec.TemplateRef = v1alpha1.TemplateReference{Name: "other"}
	}); err == nil {
		t.Error("HOLE: grant on a namesake course swapped the template of the deleted course's used environment")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := patchUserland(ctx, ta, ns, left.Name, func(ul *v1alpha1.Userland) {
		ul.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}}
	}); err == nil {
		t.Error("HOLE: grant on a namesake course set an owner on the deleted course's used environment")
	}
	var cur v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(left), &cur); err != nil {
		t.Fatal(err)
	}
	if err := ta.Delete(ctx, &cur); err == nil {
		t.Error("HOLE: grant on a namesake course deleted the deleted course's used environment (made again with a fresh budget)")
	} else if !strings.Contains(err.Error(), `verb "grant"`) {
		t.Errorf("deletion refused, not for grant: %v", err)
	}
}
