package actions

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
)

// TestAdversaryToday3FirstGrantWriteTrustsACachedCourse: the live check
// of the Course (stillGoverns) once ran only on a retry after a conflict. The
// dashboard's course grant hands Grant the Course from the gateway's
// cache; a roster change just made (the student made staff, the budget
// removed) that the cache has not seen moves no resourceVersion of the
// Userland, so the first patch does not conflict and lands with no live
// look at the Course at all: the grant is written on an environment the
// course budget no longer governs, which the retry path refuses with
// ErrBudgetChanged.
func TestAdversaryToday3FirstGrantWriteTrustsACachedCourse(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	for name, change := range map[string]func(*v1alpha1.Course){
		"student made staff": func(c *v1alpha1.Course) { c.Spec.Staff.Users = append(c.Spec.Staff.Users, "alice") },
		"budget removed":     func(c *v1alpha1.Course) { c.Spec.Limits.Budget = nil },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cached, ul := budgetedStudent()
			c := adversaryTodayClient(t, interceptor.Funcs{}, cached.DeepCopy(), ul.DeepCopy())

			// The course manager's change, which the gateway's cache has
			// not delivered yet: the page still holds cached.
			var live v1alpha1.Course
			if err := c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "class"}, &live); err != nil {
				t.Fatal(err)
			}
			change(&live)
			if err := c.Update(ctx, &live); err != nil {
				t.Fatal(err)
			}
			var read v1alpha1.Userland
			if err := c.Get(ctx, client.ObjectKeyFromObject(ul), &read); err != nil {
				t.Fatal(err)
			}
			if !course.BudgetGoverns(cached, &read) || course.BudgetGoverns(&live, &read) {
				t.Fatal("setup: the cached Course governs, the live one must not")
			}
			// As courseGrant calls it: live reader d.Live, cached c.
			err := GrantIfUnchanged(ctx, c, c, &read, cached, nil, 3, "ta", now, "")
			if !errors.Is(err, ErrBudgetChanged) {
				t.Errorf("GrantIfUnchanged = %v, want ErrBudgetChanged", err)
			}
			if got := adversaryTodayGranted(t, c, ul.Name, now); got != 0 {
				t.Errorf("granted %dh on an environment the live Course's budget no longer governs", got)
			}
		})
	}
}
