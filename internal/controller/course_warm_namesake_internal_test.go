package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/testobj"
	"github.com/userland-dev/userland/internal/timetable"
)

// TestWarmPassesOverANamesake: the warm-up decides from the cache, which
// can still show a student's environment as it was before its name was
// taken again. The API server refuses that one start (its patch names the
// old UID); the rest of the class must still be warmed.
//
// The client is a fake whose patch of the stale one answers as the real
// API server does ("metadata.uid: field is immutable"); that answer, and
// actions.Replaced's reading of it, are checked against the real API
// server in the gateway's TestAdversaryActionOnANamesakeIsRefused. A real
// cache cannot be held behind on demand.
func TestWarmPassesOverANamesake(t *testing.T) {
	t.Parallel()
	const ns = "class"
	c := testobj.MakeCourse(ns, "db").Students("alice", "bob", "carol").Obj()
	c.UID = "course-uid"
	c.Spec.Schedule = &v1alpha1.CourseSchedule{} // the warm-up runs only for a schedule
	var uls []v1alpha1.Userland
	for _, user := range []string{"alice", "bob", "carol"} {
		ul := testobj.MakeUserland(ns, user+"-lab", user, "lab").Obj()
		ul.UID = types.UID(user + "-uid")
		ul.Labels = map[string]string{v1alpha1.LabelCourse: c.Name}
		ul.Annotations = map[string]string{
			v1alpha1.AnnotationProvisionedByCourse: string(c.UID),
			v1alpha1.AnnotationEnrolledBy:          course.BasisStudentUser,
		}
		uls = append(uls, *ul)
	}
	objs := []client.Object{}
	for i := range uls {
		objs = append(objs, uls[i].DeepCopy())
	}
	stale := "bob-lab"
	var staleTried atomic.Int32
	gk := v1alpha1.GroupVersion.WithKind("Userland").GroupKind()
	cl := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if obj.GetName() == stale {
					staleTried.Add(1)
					return apierrors.NewInvalid(gk, stale, field.ErrorList{
						field.Invalid(field.NewPath("metadata", "uid"), "bob-uid", "field is immutable"),
					})
				}
				return cl.Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	rec := events.NewFakeRecorder(10)
	r := &CourseReconciler{Client: cl, Recorder: rec}
	start := time.Now().Add(10 * time.Minute)
	session := &timetable.Session{WarmupStart: start.Add(-15 * time.Minute), Start: start, End: start.Add(time.Hour)}
	if err := r.warm(context.Background(), &courseState{c: c, userlands: uls}, session); err != nil {
		t.Fatalf("warm with one stale entry: %v", err)
	}
	for _, tc := range []struct {
		name   string
		warmed bool
	}{{"alice-lab", true}, {"bob-lab", false}, {"carol-lab", true}} {
		var got v1alpha1.Userland
		if err := cl.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: tc.name}, &got); err != nil {
			t.Fatal(err)
		}
		if warmed := got.Annotations[v1alpha1.AnnotationRestartedAt] != ""; warmed != tc.warmed {
			t.Errorf("%s warmed = %v, want %v", tc.name, warmed, tc.warmed)
		}
	}
	if n := staleTried.Load(); n != 1 {
		t.Errorf("the stale entry was tried %d times, want 1 (else this test shows nothing)", n)
	}
	if n := len(rec.Events); n != 2 {
		t.Errorf("%d Warmed events, want 2 (none for the stale one)", n)
	}
}
