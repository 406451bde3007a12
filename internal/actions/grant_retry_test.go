package actions

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestGrantRetryRechecksTheCourse: a course grant whose first write
// conflicts is written on retry only while the live Course still governs
// the environment with its budget. The roster changes between the
// caller's check and the retry, as a course manager's edit can.
func TestGrantRetryRechecksTheCourse(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		// meanwhile changes the stored Course while the first write
		// conflicts; nil leaves it as the caller read it.
		meanwhile func(*v1alpha1.Course)
		wantErr   error
		wantHours int64
	}{
		{name: "roster unchanged: the retry grants", wantHours: 3},
		{name: "student made staff", wantErr: ErrBudgetChanged,
			meanwhile: func(c *v1alpha1.Course) { c.Spec.Staff.Users = append(c.Spec.Staff.Users, "alice") }},
		{name: "student removed from the roster", wantErr: ErrBudgetChanged,
			meanwhile: func(c *v1alpha1.Course) { c.Spec.Students.Users = nil }},
		{name: "budget removed", wantErr: ErrBudgetChanged,
			meanwhile: func(c *v1alpha1.Course) { c.Spec.Limits.Budget = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			crs, ul := budgetedStudent()
			patches := 0
			c := adversaryTodayClient(t, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				patches++
				if patches > 1 {
					return c.Patch(ctx, obj, p, opts...)
				}
				if tt.meanwhile != nil {
					var stored v1alpha1.Course
					if err := c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "class"}, &stored); err != nil {
						return err
					}
					tt.meanwhile(&stored)
					if err := c.Update(ctx, &stored); err != nil {
						return err
					}
				}
				return apierrors.NewConflict(schema.GroupResource{Group: "userland.dev", Resource: "userlands"}, obj.GetName(), errors.New("moved"))
			}}, crs.DeepCopy(), ul.DeepCopy())
			var read v1alpha1.Userland
			if err := c.Get(ctx, client.ObjectKeyFromObject(ul), &read); err != nil {
				t.Fatal(err)
			}
			if !course.BudgetGoverns(crs, &read) {
				t.Fatal("setup: the course's budget does not govern the environment")
			}
			err := Grant(ctx, c, c, &read, crs, nil, 3, "ta", now)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Grant: %v, want %v", err, tt.wantErr)
			}
			if got := adversaryTodayGranted(t, c, ul.Name, now); got != tt.wantHours {
				t.Errorf("granted %dh, want %dh (patches %d)", got, tt.wantHours, patches)
			}
		})
	}
}

// budgetedStudent is a course with a weekly budget and its student
// alice's environment, which that budget governs.
func budgetedStudent() (*v1alpha1.Course, *v1alpha1.Userland) {
	crs := testobj.MakeCourse("ns", "class").Students("alice").Template("app", v1alpha1.ProvisionOnSignIn).Obj()
	crs.UID = "course-1"
	crs.Spec.Limits.Budget = &v1alpha1.BudgetSpec{Hours: 10, Period: v1alpha1.BudgetWeek}
	ul := course.NewUserland(crs, "alice", course.BasisStudentUser, v1alpha1.TemplateReference{Name: "app"})
	ul.Name, ul.UID = "alice-app", "uid-1"
	return crs, ul
}
