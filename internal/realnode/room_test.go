//go:build realnode

package realnode_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/testobj"
)

// roomBeforeClass checks a course's placeholder and image puller on the
// real node, from the chart's controller: a session a few minutes ahead
// has its warm-up open, so the puller's pod runs the userland binary it
// copied as the command of the probe image (one static binary, no
// shell), under runc, as nobody with a read-only root, and reports the
// node done; the placeholder runs at the chart's PriorityClass. The
// probe image is imported, not pulled: this shows that the puller's way
// of running any image works and is counted; pullerPulls shows a pull
// from a registry.
func roomBeforeClass(ctx context.Context, t *testing.T, n *realnode.Node, ns string) {
	t.Helper()
	c := n.Cluster.Client
	now := time.Now().UTC()
	start := now.Truncate(time.Minute).Add(15 * time.Minute)
	end := start.Add(30 * time.Minute)
	if end.Day() != now.Day() {
		t.Logf("NOT RUN: the room before class: a session %s-%s UTC would cross midnight", start.Format("15:04"), end.Format("15:04"))
		return
	}
	course := testobj.MakeCourse(ns, "warm").Term(now.Add(-time.Hour), now.Add(30*24*time.Hour)).
		Students("bob").Template("probe", v1alpha1.ProvisionOnSignIn).
		Dated(now.Format(time.DateOnly), start.Format("15:04"), end.Format("15:04"), "UTC").
		Warmup(20 * time.Minute).Placeholders(1).Obj()
	createAdmitted(ctx, t, c, course, "a course with a session in 15 minutes", time.Minute)
	created := time.Now()

	var live v1alpha1.Course
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(course), &live); err != nil {
			t.Fatal(err)
		}
		if s := live.Status.NextSession; s != nil && s.Images != nil && s.Images.Desired == 1 && s.Images.Ready == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the course's images are not on the node 3 minutes after it was created: %+v; %s", live.Status.NextSession, pullerPods(ctx, t, c, ns))
		}
		time.Sleep(time.Second)
	}
	t.Logf("TIMING images on 1 of 1 nodes %s after the course was created", time.Since(created).Round(100*time.Millisecond))

	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{controller.LabelImagePullerFor: string(live.UID)}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, st := range p.Status.InitContainerStatuses {
			if term := st.State.Terminated; term == nil || term.ExitCode != 0 {
				t.Errorf("puller %s: init container %s (%s) did not exit 0: %+v", p.Name, st.Name, st.Image, st.State)
			}
		}
	}

	deadline = time.Now().Add(time.Minute)
	for {
		var held corev1.PodList
		if err := c.List(ctx, &held, client.InNamespace(ns), client.MatchingLabels{controller.LabelPlaceholderFor: string(live.UID)}); err != nil {
			t.Fatal(err)
		}
		if len(held.Items) == 1 && held.Items[0].Status.Phase == corev1.PodRunning {
			if p := held.Items[0].Spec.Priority; p == nil || *p != -10 {
				t.Errorf("placeholder priority %v, want the chart's -10", p)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no placeholder running a minute after the images: %+v", held.Items)
		}
		time.Sleep(time.Second)
	}
}

// pullerPods says what the course's puller pods are doing, for a failure.
func pullerPods(ctx context.Context, t *testing.T, c client.Client, ns string) string {
	t.Helper()
	var sets appsv1.DaemonSetList
	_ = c.List(ctx, &sets, client.InNamespace(ns))
	var pods corev1.PodList
	_ = c.List(ctx, &pods, client.InNamespace(ns))
	out := fmt.Sprintf("%d DaemonSets;", len(sets.Items))
	for _, p := range pods.Items {
		out += fmt.Sprintf(" pod %s %s init %+v;", p.Name, p.Status.Phase, p.Status.InitContainerStatuses)
	}
	return out
}

// placeholderPreempted: a placeholder holding 60% of the real node's CPU
// gives way to an environment of the same size (the scheduler preempts
// it, the kubelet stops it), and the controller puts it back, Pending:
// the pod a cluster autoscaler would add a node for.
func placeholderPreempted(ctx context.Context, t *testing.T, n *realnode.Node, ns string) {
	t.Helper()
	c := n.Cluster.Client
	now := time.Now().UTC()
	start := now.Truncate(time.Minute).Add(15 * time.Minute)
	end := start.Add(30 * time.Minute)
	if end.Day() != now.Day() {
		t.Logf("NOT RUN: a placeholder preempted: a session %s-%s UTC would cross midnight", start.Format("15:04"), end.Format("15:04"))
		return
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil || len(nodes.Items) != 1 {
		t.Fatalf("the real node: %v, %d nodes", err, len(nodes.Items))
	}
	cpu := nodes.Items[0].Status.Allocatable.Cpu().MilliValue() * 6 / 10
	big := testobj.MakeTemplate(ns, "big").Image(probeImage).Obj()
	big.Spec.PodTemplate.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)}
	createAdmitted(ctx, t, c, big, "a template asking for 60% of the node's CPU", time.Minute)
	course := testobj.MakeCourse(ns, "big").Term(now.Add(-time.Hour), now.Add(30*24*time.Hour)).
		Students("carol").Template("big", v1alpha1.ProvisionOnSignIn).
		Dated(now.Format(time.DateOnly), start.Format("15:04"), end.Format("15:04"), "UTC").
		Warmup(20 * time.Minute).Placeholders(1).PullImages(false).Obj()
	createAdmitted(ctx, t, c, course, "a course holding 60% of the node", time.Minute)
	var live v1alpha1.Course
	if err := c.Get(ctx, client.ObjectKeyFromObject(course), &live); err != nil {
		t.Fatal(err)
	}
	held := waitPlaceholder(ctx, t, c, ns, string(live.UID), "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	created := time.Now()
	ul := testobj.MakeUserland(ns, "carol", "carol", "big").Obj()
	createAdmitted(ctx, t, c, ul, "carol's environment, as large as the placeholder", time.Minute)
	readyPod(ctx, t, n, ns, map[string]string{v1alpha1.LabelUserland: ul.Name})
	t.Logf("TIMING carol's environment pod Ready %s after the Userland was created, the placeholder preempted", time.Since(created).Round(100*time.Millisecond))
	waitPlaceholder(ctx, t, c, ns, string(live.UID), "put back, Pending", func(p *corev1.Pod) bool {
		return p.UID != held.UID && p.Status.Phase == corev1.PodPending && p.Spec.NodeName == ""
	})
}

// waitPlaceholder waits up to two minutes for the course's one
// placeholder to be as ok says.
func waitPlaceholder(ctx context.Context, t *testing.T, c client.Client, ns, uid, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var held corev1.PodList
		if err := c.List(ctx, &held, client.InNamespace(ns), client.MatchingLabels{controller.LabelPlaceholderFor: uid}); err != nil {
			t.Fatal(err)
		}
		if len(held.Items) == 1 && held.Items[0].DeletionTimestamp == nil && ok(&held.Items[0]) {
			return &held.Items[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the placeholder is not %s after two minutes: %+v", what, held.Items)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
