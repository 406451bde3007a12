package controller_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// courseUserlands lists the Userlands carrying the course's label, as
// `kubectl get ul -l userland.dev/course=<name>` does.
func courseUserlands(t *testing.T, ctx context.Context, ns, name string) []v1alpha1.Userland {
	t.Helper()
	var list v1alpha1.UserlandList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCourse: name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func userlandOf(items []v1alpha1.Userland, user string) *v1alpha1.Userland {
	for i := range items {
		if items[i].Spec.User == user {
			return &items[i]
		}
	}
	return nil
}

func waitCourse(t *testing.T, ns, name, what string, ok func(*v1alpha1.Course) bool) *v1alpha1.Course {
	t.Helper()
	var c v1alpha1.Course
	env.Eventually(t, 2*time.Minute, what, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &c); err != nil {
			return false, err
		}
		return c.Status.ObservedGeneration == c.Generation && ok(&c), nil
	})
	return &c
}

func students(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("student%03d@uni.example", i)
	}
	return out
}

// TestCourseProvisionsTheRoster: 200 listed students get the up-front
// template, stopped until first use; adding one provisions them, removing
// one stops theirs (Unenrolled) and keeps it; status counts students.
func TestCourseProvisionsTheRoster(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctrl := sharedController(t)
	ctx := context.Background()
	create(t, template(ns, "lab", "example.org/lab:1"))
	roster := students(200)
	start := time.Now()
	create(t, testobj.MakeCourse(ns, "db").Students(roster...).Staff("prof@uni.example").Template("lab", v1alpha1.ProvisionUpFront).Obj())

	c := waitCourse(t, ns, "db", "200 students provisioned", func(c *v1alpha1.Course) bool {
		return c.Status.Enrolled == 200 && c.Status.Provisioned == 200
	})
	t.Logf("200 students enrolled and provisioned in %s", time.Since(start).Round(time.Millisecond))
	if diff := cmp.Diff(v1alpha1.CourseInTerm, c.Status.Phase); diff != "" {
		t.Errorf("phase (-want +got):\n%s", diff)
	}
	if cond := courseCondition(c, v1alpha1.ConditionReady); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v, want True", cond)
	}
	items := courseUserlands(t, ctx, ns, "db")
	if len(items) != 201 {
		t.Fatalf("%d Userlands carry the course label, want 200 students + 1 staff", len(items))
	}
	first := userlandOf(items, roster[0])
	ul := env.WaitPhase(t, ns, first.Name, v1alpha1.PhaseStopped)
	if ul.Status.StoppedReason != v1alpha1.StoppedNotStarted {
		t.Errorf("an up-front environment is %s/%s before anyone opened it, want Stopped/NotStarted", ul.Status.Phase, ul.Status.StoppedReason)
	}

	// Roster changes: one added, one removed.
	var live v1alpha1.Course
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(live.DeepCopy())
	live.Spec.Students.Users = append(slices.Clone(live.Spec.Students.Users[1:]), "late@uni.example")
	if err := env.Client.Patch(ctx, &live, patch); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "the late student's environment", func(ctx context.Context) (bool, error) {
		return userlandOf(courseUserlands(t, ctx, ns, "db"), "late@uni.example") != nil, nil
	})
	removed := env.WaitPhase(t, ns, first.Name, v1alpha1.PhaseStopped)
	env.Eventually(t, time.Minute, "the removed student's environment stopped as Unenrolled", func(ctx context.Context) (bool, error) {
		ul, err := get(t, ctx, ns, first.Name)
		return err == nil && ul.Status.StoppedReason == v1alpha1.StoppedUnenrolled, err
	})
	if removed.DeletionTimestamp != nil {
		t.Error("removing a student from the roster deleted their environment")
	}
	// A removed student's visit does not start it.
	recordActivity(t, removed, ctrl.clock.Now())
	time.Sleep(2 * time.Second)
	if ul, _ := get(t, ctx, ns, first.Name); ul.Status.Phase != v1alpha1.PhaseStopped {
		t.Errorf("a removed student's activity started their environment: %s", ul.Status.Phase)
	}
	waitCourse(t, ns, "db", "counts after the roster change", func(c *v1alpha1.Course) bool {
		return c.Status.Enrolled == 200 && c.Status.Provisioned == 200
	})
}

func courseCondition(c *v1alpha1.Course, typ string) *metav1.Condition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == typ {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

// TestCourseRunningLimitQueues: with maxRunning 2, four students asking
// at once get two environments and two places in line; one stopping lets
// the first in line start.
func TestCourseRunningLimitQueues(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctrl := sharedController(t)
	ctx := context.Background()
	create(t, template(ns, "lab", "example.org/lab:1"))
	roster := students(4)
	create(t, testobj.MakeCourse(ns, "ml").Students(roster...).Template("lab", v1alpha1.ProvisionUpFront).MaxRunning(2).Obj())
	waitCourse(t, ns, "ml", "4 provisioned", func(c *v1alpha1.Course) bool { return c.Status.Provisioned == 4 })
	items := courseUserlands(t, ctx, ns, "ml")
	names := map[string]string{}
	for i := range items {
		names[items[i].Spec.User] = items[i].Name
	}
	// They ask one second apart, in roster order (as the gateway records
	// a visit).
	for i, user := range roster {
		ul := env.WaitPhase(t, ns, names[user], v1alpha1.PhaseStopped)
		recordActivity(t, ul, ctrl.clock.Now().Add(time.Duration(i)*time.Second))
	}
	env.WaitPhase(t, ns, names[roster[0]], v1alpha1.PhaseReady)
	env.WaitPhase(t, ns, names[roster[1]], v1alpha1.PhaseReady)
	for i, user := range roster[2:] {
		want := int32(i + 1)
		env.Eventually(t, time.Minute, fmt.Sprintf("%s queued at %d", user, want), func(ctx context.Context) (bool, error) {
			ul, err := get(t, ctx, ns, names[user])
			return err == nil && ul.Status.StoppedReason == v1alpha1.StoppedQueued && ul.Status.QueuePosition == want, err
		})
	}
	ul, _ := get(t, ctx, ns, names[roster[3]])
	if c := condition(ul, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonQueued {
		t.Errorf("Ready of a queued environment = %+v, want reason Queued", c)
	} else {
		t.Logf("queued: %s", c.Message)
	}
	waitCourse(t, ns, "ml", "2 running, 2 queued", func(c *v1alpha1.Course) bool {
		return c.Status.Running == 2 && c.Status.Ready == 2 && c.Status.Queued == 2
	})

	// The first student stops theirs: the first in line starts, the
	// second moves up.
	first, _ := get(t, ctx, ns, names[roster[0]])
	patch := client.MergeFrom(first.DeepCopy())
	first.Spec.Suspend = true
	if err := env.Client.Patch(ctx, first, patch); err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, ns, names[roster[2]], v1alpha1.PhaseReady)
	env.Eventually(t, time.Minute, "the last student moved up to 1", func(ctx context.Context) (bool, error) {
		ul, err := get(t, ctx, ns, names[roster[3]])
		return err == nil && ul.Status.QueuePosition == 1, err
	})
}

// TestCourseSharedVolumesAndCaps: the pod a student runs mounts the
// course material read-only and is capped; staff's mounts it read-write
// and is not.
func TestCourseSharedVolumesAndCaps(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	sharedController(t)
	ctx := context.Background()
	tmpl := template(ns, "lab", "example.org/lab:1")
	tmpl.Spec.PodTemplate.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
	material := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "material"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	create(t, tmpl, material)
	create(t, testobj.MakeCourse(ns, "os").Students("s@uni.example").Staff("ta@uni.example").
		Template("lab", v1alpha1.ProvisionUpFront).SharedVolume("material", "material", "/course").PerStudent("1", "1Gi").Obj())

	// A ReadWriteOnce claim cannot serve a class on many nodes: said.
	c := waitCourse(t, ns, "os", "the claim reported as not shareable", func(c *v1alpha1.Course) bool {
		cond := courseCondition(c, v1alpha1.ConditionSharedVolumesReady)
		return cond != nil && cond.Reason == v1alpha1.ReasonClaimNotShareable
	})
	t.Logf("SharedVolumesReady: %s", courseCondition(c, v1alpha1.ConditionSharedVolumesReady).Message)

	items := courseUserlands(t, ctx, ns, "os")
	deployment := func(user string) *appsv1.Deployment {
		ul := userlandOf(items, user)
		var dep appsv1.Deployment
		env.Eventually(t, time.Minute, "deployment of "+user, func(ctx context.Context) (bool, error) {
			return env.Client.Get(ctx, client.ObjectKeyFromObject(ul), &dep) == nil, nil
		})
		return &dep
	}
	type mount struct {
		Claim            string
		Path             string
		ClaimRO, MountRO bool
	}
	mounts := func(dep *appsv1.Deployment) []mount {
		var out []mount
		spec := dep.Spec.Template.Spec
		for _, v := range spec.Volumes {
			if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "material" {
				continue
			}
			for _, m := range spec.Containers[0].VolumeMounts {
				if m.Name == v.Name {
					out = append(out, mount{"material", m.MountPath, v.PersistentVolumeClaim.ReadOnly, m.ReadOnly})
				}
			}
		}
		return out
	}
	student, staff := deployment("s@uni.example"), deployment("ta@uni.example")
	if diff := cmp.Diff([]mount{{"material", "/course", true, true}}, mounts(student)); diff != "" {
		t.Errorf("student's shared mount (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]mount{{"material", "/course", false, false}}, mounts(staff)); diff != "" {
		t.Errorf("staff's shared mount (-want +got):\n%s", diff)
	}
	wantPod := &corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	if diff := cmp.Diff(wantPod, student.Spec.Template.Spec.Resources); diff != "" {
		t.Errorf("student's pod resources (-want +got):\n%s", diff)
	}
	if got := student.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]; got.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("student's container cpu limit %s, want lowered to the cap 1", got.String())
	}
	if staff.Spec.Template.Spec.Resources != nil {
		t.Errorf("staff's pod is capped: %+v", staff.Spec.Template.Spec.Resources)
	}

	// A ReadWriteMany claim in its place satisfies the condition.
	shared := material.DeepCopy()
	shared.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "material-rwx"}
	shared.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	create(t, shared)
	var live v1alpha1.Course
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(live.DeepCopy())
	live.Spec.SharedVolumes[0].ClaimName = "material-rwx"
	if err := env.Client.Patch(ctx, &live, patch); err != nil {
		t.Fatal(err)
	}
	waitCourse(t, ns, "os", "the shared claim ready", func(c *v1alpha1.Course) bool {
		cond := courseCondition(c, v1alpha1.ConditionSharedVolumesReady)
		return cond != nil && cond.Status == metav1.ConditionTrue
	})
	// The student's pod actually runs with it (kwok binds the claim).
	ul := userlandOf(items, "s@uni.example")
	recordActivity(t, ul, time.Now())
	env.WaitPhase(t, ns, ul.Name, v1alpha1.PhaseReady)
}

// TestCourseTerm: before the term a student's visit starts nothing; from
// its start it does; at its end students' environments stop and staff's
// keep running. Time moves by the injected clock.
func TestCourseTerm(t *testing.T) {
	ns := env.Namespace(t)
	ctrl := startController(t)
	ctx := context.Background()
	create(t, template(ns, "lab", "example.org/lab:1"))
	now := time.Now().Truncate(time.Second)
	start, end := now.Add(24*time.Hour), now.Add(48*time.Hour)
	create(t, testobj.MakeCourse(ns, "hist").Term(start, end).Students("s@uni.example").Staff("ta@uni.example").
		Template("lab", v1alpha1.ProvisionUpFront).Obj())
	waitCourse(t, ns, "hist", "upcoming and provisioned", func(c *v1alpha1.Course) bool {
		return c.Status.Phase == v1alpha1.CourseUpcoming && c.Status.Provisioned == 1
	})
	items := courseUserlands(t, ctx, ns, "hist")
	s, ta := userlandOf(items, "s@uni.example"), userlandOf(items, "ta@uni.example")

	recordActivity(t, s, ctrl.clock.Now())
	recordActivity(t, ta, ctrl.clock.Now())
	env.WaitPhase(t, ns, ta.Name, v1alpha1.PhaseReady)
	env.Eventually(t, time.Minute, "the student held until the term starts", func(ctx context.Context) (bool, error) {
		ul, err := get(t, ctx, ns, s.Name)
		return err == nil && ul.Status.StoppedReason == v1alpha1.StoppedBeforeTerm, err
	})
	got, _ := get(t, ctx, ns, s.Name)
	t.Logf("before the term: %s", condition(got, v1alpha1.ConditionReady).Message)

	ctrl.clock.Step(25 * time.Hour)
	recordActivity(t, got, ctrl.clock.Now())
	env.WaitPhase(t, ns, s.Name, v1alpha1.PhaseReady)

	ctrl.clock.Step(24 * time.Hour)
	poke(t, ns, s.Name)
	poke(t, ns, ta.Name)
	env.Eventually(t, time.Minute, "the student's environment stopped at the term's end", func(ctx context.Context) (bool, error) {
		ul, err := get(t, ctx, ns, s.Name)
		if err == nil && ul.Status.StoppedReason != v1alpha1.StoppedTermEnded {
			err = fmt.Errorf("%s/%s %+v", ul.Status.Phase, ul.Status.StoppedReason, condition(ul, v1alpha1.ConditionReady))
		}
		return err == nil, err
	})
	if ul := env.WaitPhase(t, ns, ta.Name, v1alpha1.PhaseReady); ul.Status.Phase != v1alpha1.PhaseReady {
		t.Errorf("staff's environment is %s after the term", ul.Status.Phase)
	}
}

// TestCourseRetention: after the term and its retention students'
// Userlands are deleted (retained claims stay); with a snapshot class,
// only once a snapshot of each claim is ready. Staff's stay.
func TestCourseRetention(t *testing.T) {
	for _, snapshots := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshots=%v", snapshots), func(t *testing.T) {
			ns := env.Namespace(t)
			ctrl := startController(t)
			ctx := context.Background()
			create(t, template(ns, "lab", "example.org/lab:1"))
			now := time.Now().Truncate(time.Second)
			class := ""
			if snapshots {
				class = "csi-snapclass"
			}
			create(t, testobj.MakeCourse(ns, "art").Term(now.Add(-time.Hour), now.Add(time.Hour)).Students("s@uni.example").Staff("ta@uni.example").
				Template("lab", v1alpha1.ProvisionUpFront).Retention(24*time.Hour, class).Obj())
			waitCourse(t, ns, "art", "provisioned", func(c *v1alpha1.Course) bool { return c.Status.Provisioned == 1 })
			items := courseUserlands(t, ctx, ns, "art")
			s, ta := userlandOf(items, "s@uni.example"), userlandOf(items, "ta@uni.example")
			env.Eventually(t, time.Minute, "the student's claim", func(ctx context.Context) (bool, error) {
				return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Name + "-home"}, &corev1.PersistentVolumeClaim{}) == nil, nil
			})

			if snapshots {
				// The term ends now by the API server's clock too, so the
				// snapshots taken from here on are after it.
				endTerm(t, ns, "art")
			}
			ctrl.clock.Step(26 * time.Hour)
			poke(t, ns, s.Name) // the course hears of its Userlands' changes
			if snapshots {
				var snap snapshotv1.VolumeSnapshot
				env.Eventually(t, time.Minute, "a snapshot of the student's claim", func(ctx context.Context) (bool, error) {
					return snapClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Name + "-home-final"}, &snap) == nil, nil
				})
				if diff := cmp.Diff(ptr.To(s.Name+"-home"), snap.Spec.Source.PersistentVolumeClaimName); diff != "" {
					t.Errorf("snapshot source (-want +got):\n%s", diff)
				}
				waitCourse(t, ns, "art", "waiting for the snapshot", func(c *v1alpha1.Course) bool {
					cond := courseCondition(c, v1alpha1.ConditionReady)
					return cond != nil && cond.Reason == v1alpha1.ReasonSnapshotsPending
				})
				if _, err := get(t, ctx, ns, s.Name); err != nil {
					t.Fatalf("the Userland went before its snapshot was ready: %v", err)
				}
				// The CSI snapshot controller's part: the snapshot is ready.
				patch := client.MergeFrom(snap.DeepCopy())
				snap.Status = &snapshotv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(true)}
				if err := snapClient(t).Status().Patch(ctx, &snap, patch); err != nil {
					t.Fatal(err)
				}
				poke(t, ns, s.Name)
			}
			env.Eventually(t, 2*time.Minute, "the student's Userland deleted", func(ctx context.Context) (bool, error) {
				_, err := get(t, ctx, ns, s.Name)
				return client.IgnoreNotFound(err) == nil && err != nil, nil
			})
			var claim corev1.PersistentVolumeClaim
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Name + "-home"}, &claim); err != nil {
				t.Errorf("the student's retained claim is gone: %v", err)
			}
			if _, err := get(t, ctx, ns, ta.Name); err != nil {
				t.Errorf("staff's environment was deleted: %v", err)
			}
			waitCourse(t, ns, "art", "retired", func(c *v1alpha1.Course) bool { return c.Status.Phase == v1alpha1.CourseRetired })
		})
	}
}

// endTerm moves the course's term to have ended a moment ago (by the API
// server's clock, which stamps snapshots; the controller's may run ahead).
func endTerm(t *testing.T, ns, name string) {
	t.Helper()
	var c v1alpha1.Course
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	now := time.Now().Truncate(time.Second)
	c.Spec.Term = v1alpha1.CourseTerm{Start: metav1.NewTime(now.Add(-2 * time.Hour)), End: metav1.NewTime(now.Add(-time.Second))}
	if err := env.Client.Patch(context.Background(), &c, patch); err != nil {
		t.Fatal(err)
	}
}
