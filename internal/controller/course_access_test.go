package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/testobj"
)

// link labels a Userland into a course as a course manager could before
// the webhook, or an earlier version's adoption did: the label and an
// enrolment, no provenance.
func link(t *testing.T, ns, name, courseName string) {
	t.Helper()
	ul, err := get(t, context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ul.DeepCopy())
	ul.Labels = map[string]string{v1alpha1.LabelCourse: courseName}
	ul.Annotations = map[string]string{v1alpha1.AnnotationEnrolledBy: course.BasisStudentUser}
	if err := env.Client.Patch(context.Background(), ul, patch); err != nil {
		t.Fatal(err)
	}
}

// TestCourseNeverAdopts: a listed student who already has an environment
// from the course's template keeps it to themselves; the course makes its
// own, named for the course and marked as the course's.
func TestCourseNeverAdopts(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	sharedController(t)
	ctx := context.Background()
	create(t, template(ns, "lab", "example.org/lab:1"), userland(ns, "s-lab", "s@uni.example", "lab"))
	crs := testobj.MakeCourse(ns, "db").Students("s@uni.example").Template("lab", v1alpha1.ProvisionUpFront).Obj()
	create(t, crs)
	waitCourse(t, ns, "db", "the student provisioned", func(c *v1alpha1.Course) bool { return c.Status.Provisioned == 1 })

	own, err := get(t, ctx, ns, "s-lab")
	if err != nil {
		t.Fatal(err)
	}
	if own.Labels[v1alpha1.LabelCourse] != "" || own.Annotations[v1alpha1.AnnotationEnrolledBy] != "" {
		t.Errorf("the student's own environment was taken into the course: labels %v, annotations %v", own.Labels, own.Annotations)
	}
	items := courseUserlands(t, ctx, ns, "db")
	type env struct{ Name, User, EnrolledBy, Provenance string }
	var got []env
	for _, ul := range items {
		got = append(got, env{ul.Name, ul.Spec.User, ul.Annotations[v1alpha1.AnnotationEnrolledBy], ul.Annotations[v1alpha1.AnnotationProvisionedByCourse]})
	}
	want := []env{{naming.CourseCandidateNames("db", "s@uni.example", v1alpha1.TemplateReference{Name: "lab"})[0],
		"s@uni.example", course.BasisStudentUser, string(crs.UID)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the course's environments (-want +got):\n%s", diff)
	}
}

// TestRetirementDeletesOnlyWhatTheCourseMadeForStudents: after the term
// and its retention, the course deletes the environments it made for its
// students, each after a snapshot it took itself. An environment that
// only carries the course's label (a course manager's doing, or an
// earlier version's adoption) stays, and is not even snapshotted; staff's
// stay; a student whose final snapshot someone else made first (of
// another claim, or before the term ended) keeps theirs, and the course
// says why.
func TestRetirementDeletesOnlyWhatTheCourseMadeForStudents(t *testing.T) {
	ns := env.Namespace(t)
	ctrl := startController(t)
	ctx := context.Background()
	create(t, template(ns, "lab", "example.org/lab:1"), userland(ns, "victim-lab", "victim@uni.example", "lab"))
	now := time.Now().Truncate(time.Second)
	create(t, testobj.MakeCourse(ns, "evil").Term(now.Add(-time.Hour), now.Add(time.Hour)).
		Students("s@uni.example", "t@uni.example", "u@uni.example").Staff("ta@uni.example").
		Template("lab", v1alpha1.ProvisionUpFront).Retention(time.Hour, "csi-snapclass").Obj())
	waitCourse(t, ns, "evil", "provisioned", func(c *v1alpha1.Course) bool { return c.Status.Provisioned == 3 })
	link(t, ns, "victim-lab", "evil")
	items := courseUserlands(t, ctx, ns, "evil")
	s, tt, u, ta := userlandOf(items, "s@uni.example"), userlandOf(items, "t@uni.example"), userlandOf(items, "u@uni.example"), userlandOf(items, "ta@uni.example")
	claimOf := func(ul string) string { return ul + "-home" }
	for _, name := range []string{s.Name, tt.Name, u.Name, "victim-lab"} {
		env.Eventually(t, time.Minute, "the claim of "+name, func(ctx context.Context) (bool, error) {
			return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claimOf(name)}, &corev1.PersistentVolumeClaim{}) == nil, nil
		})
	}
	// Someone who may create snapshots takes the final names first, ready
	// to use and labelled as the course's: u's during the term, t's after
	// it but of another claim.
	forge := func(name, source string) {
		t.Helper()
		snap := &snapshotv1.VolumeSnapshot{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.LabelCourse: "evil"}},
			Spec: snapshotv1.VolumeSnapshotSpec{
				Source:                  snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To(source)},
				VolumeSnapshotClassName: ptr.To("csi-snapclass"),
			},
		}
		if err := snapClient(t).Create(ctx, snap); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(snap.DeepCopy())
		snap.Status = &snapshotv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(true)}
		if err := snapClient(t).Status().Patch(ctx, snap, patch); err != nil {
			t.Fatal(err)
		}
	}
	forge(claimOf(u.Name)+"-final", claimOf(u.Name))
	time.Sleep(2 * time.Second) // creation times are in whole seconds
	endTerm(t, ns, "evil")
	forge(claimOf(tt.Name)+"-final", claimOf("victim-lab"))

	ctrl.clock.Step(2 * time.Hour)
	poke(t, ns, s.Name)
	var snap snapshotv1.VolumeSnapshot
	env.Eventually(t, time.Minute, "the course's snapshot of the student's claim", func(ctx context.Context) (bool, error) {
		return snapClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: claimOf(s.Name) + "-final"}, &snap) == nil, nil
	})
	patch := client.MergeFrom(snap.DeepCopy())
	snap.Status = &snapshotv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(true)}
	if err := snapClient(t).Status().Patch(ctx, &snap, patch); err != nil {
		t.Fatal(err)
	}
	poke(t, ns, s.Name)
	env.Eventually(t, 2*time.Minute, "the student's environment deleted", func(ctx context.Context) (bool, error) {
		_, err := get(t, ctx, ns, s.Name)
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
	c := waitCourse(t, ns, "evil", "the forged snapshot reported", func(c *v1alpha1.Course) bool {
		cond := courseCondition(c, v1alpha1.ConditionReady)
		return cond != nil && cond.Reason == v1alpha1.ReasonSnapshotMismatch
	})
	t.Logf("Ready: %s", courseCondition(c, v1alpha1.ConditionReady).Message)
	for _, name := range []string{tt.Name, u.Name, "victim-lab", ta.Name} {
		if ul, err := get(t, ctx, ns, name); err != nil || ul.DeletionTimestamp != nil {
			t.Errorf("%s was deleted at retirement (%v)", name, err)
		}
	}
	err := snapClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: claimOf("victim-lab") + "-final"}, &snapshotv1.VolumeSnapshot{})
	if client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("the course snapshotted an environment it did not make (%v)", err)
	}
}

// TestCourseNeverSharesSomebodysHome: a course naming a person's home
// claim as shared material (admitted before the webhook refused it) is
// told so, and no environment of the course mounts it.
func TestCourseNeverSharesSomebodysHome(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	sharedController(t)
	ctx := context.Background()
	create(t, template(ns, "lab", "example.org/lab:1"), userland(ns, "alice-lab", "alice@uni.example", "lab"))
	env.Eventually(t, time.Minute, "alice's claim", func(ctx context.Context) (bool, error) {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice-lab-home"}, &corev1.PersistentVolumeClaim{}) == nil, nil
	})
	create(t, testobj.MakeCourse(ns, "os").Students("s@uni.example").Staff("ta@uni.example").
		Template("lab", v1alpha1.ProvisionUpFront).SharedVolume("material", "alice-lab-home", "/course").Obj())
	c := waitCourse(t, ns, "os", "the claim reported as a Userland's", func(c *v1alpha1.Course) bool {
		cond := courseCondition(c, v1alpha1.ConditionSharedVolumesReady)
		ready := courseCondition(c, v1alpha1.ConditionReady)
		return cond != nil && cond.Reason == v1alpha1.ReasonClaimOfUserland && ready != nil && ready.Reason == v1alpha1.ReasonClaimOfUserland
	})
	t.Logf("SharedVolumesReady: %s", courseCondition(c, v1alpha1.ConditionSharedVolumesReady).Message)
	items := courseUserlands(t, ctx, ns, "os")
	for _, user := range []string{"s@uni.example", "ta@uni.example"} {
		ul := userlandOf(items, user)
		if ul == nil {
			t.Fatalf("no environment for %s", user)
		}
		var dep appsv1.Deployment
		env.Eventually(t, time.Minute, "deployment of "+user, func(ctx context.Context) (bool, error) {
			return env.Client.Get(ctx, client.ObjectKeyFromObject(ul), &dep) == nil, nil
		})
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "alice-lab-home" {
				t.Errorf("%s's environment mounts alice's home claim (read-only %v)", user, v.PersistentVolumeClaim.ReadOnly)
			}
		}
	}
}
