package controller_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/testobj"
)

// placeholderClass creates the chart's PriorityClass, once per control
// plane: the API server refuses pods naming a class that does not exist.
func placeholderClass(t *testing.T) {
	t.Helper()
	pc := &schedulingv1.PriorityClass{
		ObjectMeta:       metav1.ObjectMeta{Name: controller.DefaultPlaceholderPriorityClass},
		Value:            -10,
		PreemptionPolicy: ptr.To(corev1.PreemptNever),
	}
	if err := env.Client.Create(context.Background(), pc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// roomOf lists the course's placeholders (not being deleted) and pullers.
func roomOf(t *testing.T, c *v1alpha1.Course) ([]corev1.Pod, []appsv1.DaemonSet) {
	t.Helper()
	ctx := context.Background()
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels{controller.LabelPlaceholderFor: string(c.UID)}); err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	var sets appsv1.DaemonSetList
	if err := env.Client.List(ctx, &sets, client.InNamespace(c.Namespace), client.MatchingLabels{controller.LabelImagePullerFor: string(c.UID)}); err != nil {
		t.Fatal(err)
	}
	return live, sets.Items
}

func waitRoom(t *testing.T, c *v1alpha1.Course, what string, placeholders, pullers int) ([]corev1.Pod, []appsv1.DaemonSet) {
	t.Helper()
	var pods []corev1.Pod
	var sets []appsv1.DaemonSet
	env.Eventually(t, time.Minute, what, func(context.Context) (bool, error) {
		pods, sets = roomOf(t, c)
		return len(pods) == placeholders && len(sets) == pullers, nil
	})
	return pods, sets
}

// TestCourseHoldsRoomForTheSession: a course with three placeholders has
// none before its session's warm-up, three (at the placeholder priority,
// owned by the course) and an image puller from the warm-up to the
// session's end, puts back a preempted one, writes nothing in steady
// state, reports its images as the puller's DaemonSet status says, and
// removes all of it after the session.
func TestCourseHoldsRoomForTheSession(t *testing.T) {
	ns := env.Namespace(t)
	placeholderClass(t)
	ctrl := startController(t)
	create(t, template(ns, "lab", "example.org/lab:1"))
	now := ctrl.clock.Now()
	start := nextLocal(now, "Europe/Berlin", time.Wednesday, 10, 0)
	end := start.Add(90 * time.Minute)
	create(t, testobj.MakeCourse(ns, "db").Term(now.Add(-24*time.Hour), now.Add(60*24*time.Hour)).
		Students("a@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).
		Weekly("Wednesday", "10:00", "11:30", "Europe/Berlin").Placeholders(3).Obj())
	waitCourse(t, ns, "db", "its next session", func(c *v1alpha1.Course) bool { return c.Status.NextSession != nil })

	setClock(ctrl, start.Add(-20*time.Minute))
	c := touchCourse(t, ns, "db")
	if pods, sets := roomOf(t, c); len(pods)+len(sets) > 0 || c.Status.NextSession.Images != nil {
		t.Errorf("before the warm-up: %d placeholders, %d pullers, images %v; want none", len(pods), len(sets), c.Status.NextSession.Images)
	}

	setClock(ctrl, start.Add(-5*time.Minute))
	touchCourse(t, ns, "db")
	pods, sets := waitRoom(t, c, "three placeholders and a puller in the warm-up", 3, 1)
	for _, p := range pods {
		if p.Spec.Priority == nil || *p.Spec.Priority != -10 || !metav1.IsControlledBy(&p, c) {
			t.Errorf("placeholder %s: priority %v, owners %v", p.Name, p.Spec.Priority, p.OwnerReferences)
		}
	}
	images := sets[0].Spec.Template.Spec.InitContainers[1].Image
	if images != "example.org/lab:1" {
		t.Errorf("the puller pulls %q, want the template's image", images)
	}

	// The puller's status, as the DaemonSet controller reports it for
	// the kwok nodes, becomes the course's.
	c = waitCourse(t, ns, "db", "images rolled up", func(c *v1alpha1.Course) bool {
		var ds appsv1.DaemonSet
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(&sets[0]), &ds); err != nil {
			return false
		}
		im := c.Status.NextSession.Images
		return ds.Status.DesiredNumberScheduled > 0 && im != nil &&
			im.Desired == ds.Status.DesiredNumberScheduled && im.Ready == ds.Status.NumberReady
	})
	t.Logf("images on %d of %d nodes", c.Status.NextSession.Images.Ready, c.Status.NextSession.Images.Desired)

	// A student's pod preempts a placeholder: it is made again.
	if err := env.Client.Delete(context.Background(), &pods[0]); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "the preempted placeholder made again", func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(&pods[0]), &p)
		return err == nil && p.UID != pods[0].UID, client.IgnoreNotFound(err)
	})

	// Steady state writes nothing: the puller changing (a label of
	// someone else's) reconciles the course, which finds all as it is.
	time.Sleep(2 * time.Second)
	before := ctrl.writes.count(ns)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"test.userland.dev/poke":"1"}}}`))
	if err := env.Client.Patch(context.Background(), &appsv1.DaemonSet{ObjectMeta: sets[0].ObjectMeta}, patch); err != nil {
		t.Fatal(err)
	}
	time.Sleep(7 * time.Second) // the course's 5 s batch, and then some
	if writes := ctrl.writes.count(ns) - before; writes != 0 {
		t.Errorf("the controller wrote %d times in steady state, want 0: %v", writes, ctrl.writes.requestsTo(ns))
	}

	setClock(ctrl, start.Add(30*time.Minute))
	touchCourse(t, ns, "db")
	waitRoom(t, c, "room held during the session", 3, 1)

	setClock(ctrl, end.Add(time.Minute))
	touchCourse(t, ns, "db")
	waitRoom(t, c, "no room held after the session", 0, 0)
	waitCourse(t, ns, "db", "no images after the session", func(c *v1alpha1.Course) bool {
		return c.Status.NextSession != nil && c.Status.NextSession.Images == nil
	})
}

// TestCourseWithoutPullImagesPullsNothing: pullImages false keeps the
// placeholders and runs no puller.
func TestCourseWithoutPullImagesPullsNothing(t *testing.T) {
	ns := env.Namespace(t)
	placeholderClass(t)
	ctrl := startController(t)
	create(t, template(ns, "lab", "example.org/lab:1"))
	now := ctrl.clock.Now()
	start := nextLocal(now, "Asia/Tokyo", time.Thursday, 9, 0)
	create(t, testobj.MakeCourse(ns, "np").Term(now.Add(-24*time.Hour), now.Add(60*24*time.Hour)).
		Students("a@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).
		Weekly("Thursday", "09:00", "10:00", "Asia/Tokyo").Placeholders(1).PullImages(false).Obj())
	c := waitCourse(t, ns, "np", "its next session", func(c *v1alpha1.Course) bool { return c.Status.NextSession != nil })
	setClock(ctrl, start.Add(-time.Minute))
	touchCourse(t, ns, "np")
	waitRoom(t, c, "one placeholder, no puller", 1, 0)
	if c = touchCourse(t, ns, "np"); c.Status.NextSession.Images != nil {
		t.Errorf("status.nextSession.images = %+v without a puller", c.Status.NextSession.Images)
	}
}

// TestPlaceholderGivesWayToAnEnvironment: with both simulated nodes held
// by placeholders sized like the template (600 of each node's 1000 CPUs),
// an environment of that template still starts: the real kube-scheduler
// preempts a placeholder for it, and the controller puts the placeholder
// back, Pending, which is what makes an autoscaler add a node.
func TestPlaceholderGivesWayToAnEnvironment(t *testing.T) {
	ns := env.Namespace(t)
	placeholderClass(t)
	ctrl := startController(t)
	big := template(ns, "big", "example.org/big:1")
	big.Spec.PodTemplate.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("600")}
	create(t, big)
	now := ctrl.clock.Now()
	start := nextLocal(now, "Europe/Berlin", time.Friday, 14, 0)
	create(t, testobj.MakeCourse(ns, "gpu").Term(now.Add(-24*time.Hour), now.Add(60*24*time.Hour)).
		Students("a@uni.example").Template("big", v1alpha1.ProvisionOnSignIn).
		Weekly("Friday", "14:00", "15:00", "Europe/Berlin").Placeholders(2).PullImages(false).Obj())
	c := waitCourse(t, ns, "gpu", "its next session", func(c *v1alpha1.Course) bool { return c.Status.NextSession != nil })
	setClock(ctrl, start.Add(-5*time.Minute))
	touchCourse(t, ns, "gpu")
	var held []corev1.Pod
	env.Eventually(t, time.Minute, "both placeholders on a node each", func(context.Context) (bool, error) {
		pods, _ := roomOf(t, c)
		held = pods
		return len(pods) == 2 && pods[0].Spec.NodeName != "" && pods[1].Spec.NodeName != "" && pods[0].Spec.NodeName != pods[1].Spec.NodeName, nil
	})

	create(t, userland(ns, "late", "late@uni.example", "big"))
	env.WaitPhase(t, ns, "late", v1alpha1.PhaseReady)
	env.Eventually(t, time.Minute, "one placeholder preempted and put back, Pending", func(context.Context) (bool, error) {
		pods, _ := roomOf(t, c)
		pending, replaced := 0, 0
		for _, p := range pods {
			if p.Spec.NodeName == "" {
				pending++
			}
			for _, h := range held {
				if p.Name == h.Name && p.UID != h.UID {
					replaced++
				}
			}
		}
		return len(pods) == 2 && pending == 1 && replaced == 1, nil
	})
}
