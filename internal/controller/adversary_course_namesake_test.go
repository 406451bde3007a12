package controller_test

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestAdversaryNamesakeCourseStopsAnotherCoursesStudents: course "hist"
// (Prof P's) made s's environment, then was deleted; the environment
// outlives it, labelled hist. A course manager M, who never had s as a
// student, creates a new Course "hist" of their own (term in the future,
// an empty roster). The controller applies M's course to every Userland
// whose label names it (resolveCourse reads the label, not the
// provenance), so M stops s's environment. With shared volumes and caps
// M's course would also change what s's environment mounts and may use.
func TestAdversaryNamesakeCourseStopsAnotherCoursesStudents(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctrl := sharedController(t)
	ctx := context.Background()
	create(t, template(ns, "lab", "example.org/lab:1"))
	now := ctrl.clock.Now().Truncate(time.Second)
	orig := testobj.MakeCourse(ns, "hist").Term(now.Add(-time.Hour), now.Add(48*time.Hour)).Students("s@uni.example").
		Template("lab", v1alpha1.ProvisionUpFront).Obj()
	create(t, orig)
	waitCourse(t, ns, "hist", "provisioned", func(c *v1alpha1.Course) bool { return c.Status.Provisioned == 1 })
	s := userlandOf(courseUserlands(t, ctx, ns, "hist"), "s@uni.example")
	recordActivity(t, s, ctrl.clock.Now())
	env.WaitPhase(t, ns, s.Name, v1alpha1.PhaseReady)

	if err := env.Client.Delete(ctx, orig); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "the first course gone", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(orig), &v1alpha1.Course{})
		return apierrors.IsNotFound(err), nil
	})
	env.WaitPhase(t, ns, s.Name, v1alpha1.PhaseReady)

	create(t, testobj.MakeCourse(ns, "hist").Term(now.Add(24*time.Hour), now.Add(48*time.Hour)).Staff("m@uni.example").
		Template("lab", v1alpha1.ProvisionOnSignIn).Obj())
	poke(t, ns, s.Name)
	stoppedBy := []v1alpha1.StoppedReason{v1alpha1.StoppedBeforeTerm, v1alpha1.StoppedTermEnded, v1alpha1.StoppedUnenrolled, v1alpha1.StoppedQueued}
	var got *v1alpha1.Userland
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		ul, err := get(t, ctx, ns, s.Name)
		if err == nil && slices.Contains(stoppedBy, ul.Status.StoppedReason) {
			got = ul
			return true, nil
		}
		return false, nil
	})
	if got != nil {
		t.Errorf("HOLE: a namesake course made by someone else stopped %s's environment %s (%s/%s)", s.Spec.User, s.Name, got.Status.Phase, got.Status.StoppedReason)
	}
}
