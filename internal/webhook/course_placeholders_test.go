package webhook_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestPlaceholdersTakeTheRightToCreatePods: placeholders are pods the
// controller runs for whoever wrote their number. A course manager who
// may edit Courses but not create pods cannot make the controller hold
// 200 template-sized pods (an autoscaler would buy nodes for them); once
// RBAC lets them create pods in the namespace, they can. Lowering the
// number, or a roster change beside a number someone else admitted,
// needs nothing.
func TestPlaceholdersTakeTheRightToCreatePods(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	if err := env.Client.Create(ctx, compliant(ns, "lab")); err != nil {
		t.Fatal(err)
	}
	const prof = "prof@uni.example"
	manager := clientAs(t, ns, prof, clusterRole("userland-course-manager"))
	waitAuthorized(t, manager, &v1alpha1.CourseList{}, client.InNamespace(ns))
	withPlaceholders := func(name string, n int32) *v1alpha1.Course {
		c := testobj.MakeCourse(ns, name).Students("a@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
		c.Spec.Schedule = &v1alpha1.CourseSchedule{
			Sessions:     []v1alpha1.CourseSession{{Day: ptr.To(v1alpha1.Weekday("Monday")), Start: "09:00", End: "10:30", TimeZone: "Europe/Berlin"}},
			Placeholders: ptr.To(n),
		}
		return c
	}

	err := manager.Create(ctx, withPlaceholders("big", 200))
	if err == nil {
		t.Fatalf("HOLE: %s, who may not create pods in %s, made the controller hold 200 placeholder pods", prof, ns)
	}
	for _, want := range []string{"spec.schedule.placeholders", "may not create pods", "0 to 200"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}

	// An admin sets 10; the manager may change the roster and lower the
	// number, but not raise it.
	admitted := withPlaceholders("db", 10)
	if err := env.Client.Create(ctx, admitted); err != nil {
		t.Fatal(err)
	}
	var crs v1alpha1.Course
	if err := manager.Get(ctx, client.ObjectKeyFromObject(admitted), &crs); err != nil {
		t.Fatal(err)
	}
	crs.Spec.Students.Users = append(crs.Spec.Students.Users, "b@uni.example")
	if err := manager.Update(ctx, &crs); err != nil {
		t.Errorf("a roster change beside an admitted number was refused: %v", err)
	}
	crs.Spec.Schedule.Placeholders = ptr.To[int32](11)
	if err := manager.Update(ctx, &crs); err == nil {
		t.Error("HOLE: the manager raised placeholders from 10 to 11 without the right to create pods")
	}
	if err := manager.Get(ctx, client.ObjectKeyFromObject(admitted), &crs); err != nil {
		t.Fatal(err)
	}
	crs.Spec.Schedule.Placeholders = ptr.To[int32](5)
	if err := manager.Update(ctx, &crs); err != nil {
		t.Errorf("lowering placeholders was refused: %v", err)
	}

	// RBAC grants pod creation: now the manager may.
	if err := env.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "create-pods"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}}},
	}); err != nil {
		t.Fatal(err)
	}
	clientAs(t, ns, prof, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "create-pods"})
	start := time.Now()
	for {
		err = manager.Create(ctx, withPlaceholders("granted", 200))
		if err == nil || time.Since(start) > 30*time.Second {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("with the right to create pods, 200 placeholders were still refused after %v: %v", time.Since(start), err)
	}
}
