package controller

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/templates"
)

// Pure-logic proofs against the Immediate rollout's budget (rollout.go) and
// its wake-ups (setup.go rolloutBudgetEvents). A fake client stands in for
// the cache, as in TestRolloutBudgetCountsUnavailableAndInflightRestarts;
// interleavings are forced through the fake's interceptor, never by timing.
// Each test asserts the behaviour the rollout promises, so each fails
// while the hole it names is open.

const adv3NS = "class"

var (
	adv3Now = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	adv3Key = templates.Key(v1alpha1.TemplateKindTemplate, adv3NS, "t")
)

// adv3Userland is a Userland of template t; pending marks it waiting for
// the template's update (status.updatePending).
func adv3Userland(name string, pending bool) *v1alpha1.Userland {
	ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: adv3NS, Name: name, UID: types.UID("uid-" + name)},
		Spec: v1alpha1.UserlandSpec{User: name, TemplateRef: v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: "t"}}}
	ul.Status.UpdatePending = pending
	return ul
}

// adv3Deployment is a running environment's Deployment at template hash
// hash, available (rolled out) or still restarting.
func adv3Deployment(name, hash string, available bool) *appsv1.Deployment {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: adv3NS, Name: name, Generation: 2,
		Labels: map[string]string{v1alpha1.LabelUserland: name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
	dep.Spec.Template.Annotations = map[string]string{AnnotationTemplateHash: hash}
	if available {
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
	} else {
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 0, AvailableReplicas: 0,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse}}}
	}
	return dep
}

// adv3Reconciler is a reconciler over a fake cache with the template
// indexes the rollout reads.
func adv3Reconciler(t *testing.T, f interceptor.Funcs, objs ...client.Object) *UserlandReconciler {
	t.Helper()
	c := newAdv3Client(f, objs...)
	return &UserlandReconciler{Client: c}
}

func newAdv3Client(f interceptor.Funcs, objs ...client.Object) client.WithWatch {
	return fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).
		WithIndex(&v1alpha1.Userland{}, IndexTemplateKey, IndexUserlandByTemplate).
		WithIndex(&v1alpha1.Userland{}, IndexPendingTemplateKey, IndexPendingUserlandByTemplate).
		WithObjects(objs...).WithInterceptorFuncs(f).Build()
}

// adv3Decide is one Immediate decision for name with the given
// maxUnavailable, as choosePodTemplate makes it (under the decide lock).
func adv3Decide(t *testing.T, r *UserlandReconciler, name string, maxUnavailable intstr.IntOrString) bool {
	t.Helper()
	spec := &v1alpha1.TemplateSpec{Rollout: v1alpha1.RolloutSpec{Policy: v1alpha1.RolloutImmediate, MaxUnavailable: &maxUnavailable}}
	s := &reconcileState{now: adv3Now, ul: adv3Userland(name, true),
		template: &templates.Resolved{Kind: v1alpha1.TemplateKindTemplate, Name: "t", Key: adv3Key, Spec: spec}}
	r.inflight.decide.Lock()
	defer r.inflight.decide.Unlock()
	ok, err := r.budgetAvailable(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func adv3Queue() workqueue.TypedRateLimitingInterface[ctrl.Request] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[ctrl.Request]())
}

func adv3Queued(q workqueue.TypedRateLimitingInterface[ctrl.Request]) map[string]bool {
	got := map[string]bool{}
	for q.Len() > 0 {
		req, _ := q.Get()
		got[req.Name] = true
		q.Done(req)
	}
	return got
}

// TestAdversaryToday3KeptCountOutlivesTheDropThatShouldEndIt: the kept
// sibling count is computed from the cache, and the Deployment event that
// should drop it can run while it is being computed (the informer updates
// the cache, then calls the handlers; neither takes the decide lock). The
// drop then finds nothing to drop, and keepCounts stores the count taken
// before the event: for up to countsMaxAge every decision ignores the
// sibling that just became unavailable, and admits one restart more than
// maxUnavailable. The old code re-read the cache for each decision and
// could not.
func TestAdversaryToday3KeptCountOutlivesTheDropThatShouldEndIt(t *testing.T) {
	t.Parallel()
	two := intstr.FromInt32(2)
	var r *UserlandReconciler // the interceptor below runs once r is set
	fired := false
	r = adv3Reconciler(t, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		if _, deps := list.(*appsv1.DeploymentList); !deps || fired {
			return nil
		}
		fired = true
		// Meanwhile y's pod dies (a node drained, an OOM kill, the
		// student's own restart): the cache shows y unavailable, then
		// the handler drops the kept count, before countSiblings
		// returns the list it already read.
		var before appsv1.Deployment
		if err := c.Get(ctx, types.NamespacedName{Namespace: adv3NS, Name: "y"}, &before); err != nil {
			return err
		}
		after := before.DeepCopy()
		after.Status = adv3Deployment("y", "h1", false).Status
		if err := c.Status().Update(ctx, after); err != nil {
			return err
		}
		r.rolloutBudgetEvents().Update(ctx, event.UpdateEvent{ObjectOld: &before, ObjectNew: after}, adv3Queue())
		return nil
	}},
		adv3Userland("a", true), adv3Deployment("a", "h1", true),
		adv3Userland("b", true), adv3Deployment("b", "h1", true),
		adv3Userland("y", false), adv3Deployment("y", "h2", true),
		adv3Userland("z", false), adv3Deployment("z", "h2", true))

	// a's decision started before y died: admitting it is cache lag.
	if !adv3Decide(t, r, "a", two) {
		t.Fatal("setup: a finds no budget with nothing unavailable")
	}
	r.inflight.add(adv3Key, types.NamespacedName{Namespace: adv3NS, Name: "a"}, adv3Now, "h2")

	// b's decision starts after the cache shows y unavailable and a is in
	// flight: 2 of maxUnavailable 2 are taken.
	if adv3Decide(t, r, "b", two) {
		t.Error("b was admitted with y unavailable in the cache and a restarting (3 unavailable, maxUnavailable 2): " +
			"the count kept by a's decision was read before y's event and stored after that event dropped nothing")
	}
	r.inflight.dropCounts(adv3Key)
	if adv3Decide(t, r, "b", two) {
		t.Error("control: a fresh count also admits b")
	}
}

// TestAdversaryToday3FinishedRestartStillCountsWhenItsSiblingsWake: with
// maxUnavailable 1, x's restart finishing is the one event that wakes the
// waiting y. x's in-flight entry is removed only by x's own reconcile
// (choosePodTemplate: done), which runs concurrently with y's and wakes no
// one. When y decides first, it finds x still in flight although the cache
// shows x's Deployment available on the new template, defers, and nothing
// ever enqueues it again (no requeue on an Immediate deferral; the next
// is the 10 h resync). The rollout stalls.
func TestAdversaryToday3FinishedRestartStillCountsWhenItsSiblingsWake(t *testing.T) {
	t.Parallel()
	one := intstr.FromInt32(1)
	restarting := adv3Deployment("x", "h2", false) // x restarted to h2 ...
	done := adv3Deployment("x", "h2", true)        // ... and is available on it
	r := adv3Reconciler(t, interceptor.Funcs{},
		adv3Userland("x", false), done,
		adv3Userland("y", true), adv3Deployment("y", "h1", true))
	r.inflight.add(adv3Key, types.NamespacedName{Namespace: adv3NS, Name: "x"}, adv3Now, "h2")

	q := adv3Queue()
	r.rolloutBudgetEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: restarting, ObjectNew: done}, q)
	if woken := adv3Queued(q); !woken["y"] {
		t.Fatalf("setup: x becoming available did not wake y (%v)", woken)
	}
	// y's reconcile, woken, before x's reconcile has called done.
	if !adv3Decide(t, r, "y", one) {
		t.Error("y, woken by x's restart finishing, finds no budget: x still counts in flight though the cache shows it available on h2; " +
			"x's reconcile then calls done() and enqueues no one, so y waits for the resync")
	}
}

// TestAdversaryToday3DeletedEnvironmentFreesBudgetButWakesNoOne: x is
// mid-restart (in flight, unavailable) when its student deletes it. Its
// Deployment's Delete event reaches rolloutBudgetEvents after the Userland
// is gone from the cache, so userlandOfChild finds nothing: no template,
// no wake-up, no drop. And x's in-flight entry, no longer a sibling's,
// counts against the template for inflightExpiry (10 min), whose expiry
// wakes no one either.
func TestAdversaryToday3DeletedEnvironmentFreesBudgetButWakesNoOne(t *testing.T) {
	t.Parallel()
	one := intstr.FromInt32(1)
	gone := adv3Deployment("x", "h2", false)
	r := adv3Reconciler(t, interceptor.Funcs{},
		adv3Userland("y", true), adv3Deployment("y", "h1", true))
	r.inflight.add(adv3Key, types.NamespacedName{Namespace: adv3NS, Name: "x"}, adv3Now, "h2")

	q := adv3Queue()
	r.rolloutBudgetEvents().Delete(context.Background(), event.DeleteEvent{Object: gone}, q)
	if woken := adv3Queued(q); !woken["y"] {
		t.Errorf("x's environment went (its Userland deleted) and freed the only slot, but y was not woken (%v)", woken)
	}
	if !adv3Decide(t, r, "y", one) {
		t.Error("y finds no budget after x was deleted: x's in-flight entry still counts though x is no sibling any more")
	}
}

// TestAdversaryToday3RestartWhoseWriteFailedBlocksItself: x's decision
// admitted its restart and added it to the in-flight tracker, then the
// write failed (an API server timeout, an admission webhook refusing the
// new pod template). The retry decides again, and x's own in-flight entry,
// with its Deployment still available on the old template, fills
// maxUnavailable 1: x defers without error, so there is no further retry,
// and every sibling is held behind it as well.
func TestAdversaryToday3RestartWhoseWriteFailedBlocksItself(t *testing.T) {
	t.Parallel()
	one := intstr.FromInt32(1)
	r := adv3Reconciler(t, interceptor.Funcs{},
		adv3Userland("x", true), adv3Deployment("x", "h1", true),
		adv3Userland("y", true), adv3Deployment("y", "h1", true))
	r.inflight.add(adv3Key, types.NamespacedName{Namespace: adv3NS, Name: "x"}, adv3Now, "h2")
	if !adv3Decide(t, r, "x", one) {
		t.Error("x's retry is refused by its own earlier, failed restart: it defers, and nothing unavailable will ever wake it")
	}
}
