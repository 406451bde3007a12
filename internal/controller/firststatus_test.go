package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

// A new environment that is Ready within the first-status window gets one
// status write, Ready; one still starting after the window shows Starting
// then, truthfully, and Ready later: two writes. The window is 10 s here so
// that a loaded machine's slow pod start does not decide the fast case.
// The environment's writes to Ready are counted too: Deployment, Service and
// status, plus the namespace's shared NetworkPolicy once.
func TestFirstStatusIsOneWriteWhenFastAndTruthfulWhenSlow(t *testing.T) {
	const window = 10 * time.Second
	ctrl := startController(t, func(o *controller.Options) { o.FirstStatusWindow = window })
	ctx := context.Background()
	ns := env.Namespace(t)
	// No volumes: a claim would be one more write, and is not what is
	// measured.
	plain := func(name string) *v1alpha1.Template {
		return testobj.MakeTemplate(ns, name).Container("web").Image("example.org/app:1").Obj()
	}
	create(t, plain("t"))
	// The template's own status (its counts) is batched per template, not
	// a write of the environment's.
	envWrites := func() []string {
		return slices.DeleteFunc(ctrl.writes.requestsTo(ns), func(w string) bool { return strings.Contains(w, "/templates/") })
	}
	before := len(envWrites())
	start := time.Now()
	create(t, userland(ns, "fast", "alice", "t"))
	env.WaitPhase(t, ns, "fast", v1alpha1.PhaseReady)
	ready := time.Since(start)
	time.Sleep(2 * time.Second) // any late write is counted
	if got := ctrl.writes.statusWrites(ns); got != 1 {
		t.Errorf("an environment Ready after %v (window %v) had %d status writes, want 1", ready, window, got)
	}
	writes := len(envWrites()) - before
	if writes != 4 {
		t.Errorf("%d controller writes to Ready, want 4: NetworkPolicy (once per namespace and template), Deployment, Service, status; all writes in the namespace:\n%s",
			writes, strings.Join(envWrites(), "\n"))
	}
	t.Logf("fast: Ready %v after create; %d writes, 1 of them status", ready.Round(time.Millisecond), writes)
	// A second environment of the template shares the policy: three.
	before = len(envWrites())
	create(t, userland(ns, "fast2", "alan", "t"))
	env.WaitPhase(t, ns, "fast2", v1alpha1.PhaseReady)
	time.Sleep(2 * time.Second)
	if writes := len(envWrites()) - before; writes != 3 {
		t.Errorf("%d controller writes to Ready for a second environment of the template, want 3 (Deployment, Service, status):\n%s",
			writes, strings.Join(envWrites()[before:], "\n"))
	}

	// Slow: the pod is bound to a node that does not exist yet, so it
	// stays Pending (not unschedulable, which would be Failed) until the
	// test creates that node for kwok to run it.
	node := "slow-" + ns
	slow := testobj.MakeTemplate(ns, "slow").Container("web").Image("example.org/app:1").Obj()
	slow.Spec.PodTemplate.Spec.NodeName = node
	create(t, slow)
	statusBefore := ctrl.writes.statusWrites(ns)
	start = time.Now()
	create(t, userland(ns, "slow", "bob", "slow"))
	time.Sleep(window / 2)
	if ul, err := get(t, ctx, ns, "slow"); err != nil || ul.Status.Phase != "" {
		t.Errorf("within the window: phase %q (err %v), want no status yet", ul.Status.Phase, err)
	}
	env.WaitPhase(t, ns, "slow", v1alpha1.PhaseStarting)
	shown := time.Since(start)
	if shown < window-time.Second {
		t.Errorf("Starting written %v after create, before the window (%v) ended", shown, window)
	}
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("10")}
	create(t, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node, Annotations: map[string]string{testenv.KwokNodeAnnotation: "fake"}},
		Status:     corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	})
	t.Cleanup(func() {
		if err := env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting node %s: %v", node, err)
		}
	})
	env.WaitPhase(t, ns, "slow", v1alpha1.PhaseReady)
	time.Sleep(2 * time.Second)
	if got := ctrl.writes.statusWrites(ns) - statusBefore; got != 2 {
		t.Errorf("a slow environment had %d status writes, want 2 (Starting after the window, then Ready); all writes in the namespace:\n%s",
			got, strings.Join(ctrl.writes.requestsTo(ns), "\n"))
	}
	t.Logf("slow: Starting shown %v after create (window %v), then Ready", shown.Round(time.Millisecond), window)
}
