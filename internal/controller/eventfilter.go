package controller

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/templates"
)

// An environment's pod and Deployment change many times on the way to
// Ready (the scheduler's binding, the kubelet's several status updates,
// the Deployment controller's conditions), and each update used to
// reconcile the environment: at a class start of a thousand those
// reconciles that could change nothing queued ahead of the ones that
// could (4.5 queue adds per environment in the 1,000-environment
// benchmark, waits of seconds). The filters below pass an update only
// when what a reconcile reads from the object moved. Creates, deletes and
// the periodic resync still pass.

// podView is what a reconcile reads from one of its environment's pods:
// health (podFailure, podReady: the functions ObserveHealth uses),
// whether it runs the current template (podServing), and the shared
// policy's label (SharedPolicyCovers), and whose Userland it is (observe
// keeps a bound environment's own pods by their UID label).
type podView struct {
	failure     Health
	failed      bool
	ready       bool
	deleting    bool
	hash        string
	restartedAt string
	policy      string
	user        string
	uid         string
}

func viewOfPod(pod *corev1.Pod) podView {
	failure, failed := podFailure(pod)
	return podView{
		failure: failure, failed: failed, ready: podReady(pod), deleting: pod.DeletionTimestamp != nil,
		hash: pod.Annotations[AnnotationTemplateHash], restartedAt: pod.Annotations[v1alpha1.AnnotationRestartedAt],
		policy: pod.Labels[LabelNetworkPolicy], user: pod.Labels[v1alpha1.LabelUserland],
		uid: pod.Labels[v1alpha1.LabelUserlandUID],
	}
}

// podSeenChanged passes a pod update only when its podView moved.
var podSeenChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*corev1.Pod)
		after, ok2 := e.ObjectNew.(*corev1.Pod)
		return !ok1 || !ok2 || viewOfPod(before) != viewOfPod(after)
	},
}

// freesRolloutPlace passes the Deployment events after which it may no
// longer count against its template's rollout budget (countsAgainstBudget
// held before and not after: rolled out, or stopped) and its deletion:
// only these can make room for a waiting sibling's restart. Waking every
// waiting sibling on every change that a reconcile reads (each restart
// makes about four) had a 10,000-environment template's rollout spend
// most of a core deciding again and again that there was no room. A new
// Deployment takes a place rather than freeing one; after a restart of
// the controller every Userland is reconciled anyway.
var freesRolloutPlace = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*appsv1.Deployment)
		after, ok2 := e.ObjectNew.(*appsv1.Deployment)
		return !ok1 || !ok2 || countsAgainstBudget(before) && !countsAgainstBudget(after)
	},
}

// leavesTemplate passes the Userland events after which it no longer
// counts under the template it was listed under: its deletion, and an
// update that points it at another template. Without the latter, a
// rollout whose only free place was held by an environment moved away
// waited for a resync (ten hours) to go on.
var leavesTemplate = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*v1alpha1.Userland)
		after, ok2 := e.ObjectNew.(*v1alpha1.Userland)
		return !ok1 || !ok2 || templates.UserlandKey(before) != templates.UserlandKey(after)
	},
}

// deploymentSeenChanged passes a Deployment update only when what a
// reconcile reads from it moved: its spec (the generation), its metadata
// (the start and idle-stop annotations, labels, owners, deletion), and
// the status rolledOut judges by. The Deployment controller's own
// bookkeeping (condition times and messages, Progressing, the collision
// count) does not pass.
var deploymentSeenChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*appsv1.Deployment)
		after, ok2 := e.ObjectNew.(*appsv1.Deployment)
		if !ok1 || !ok2 {
			return true
		}
		return before.Generation != after.Generation ||
			!before.DeletionTimestamp.Equal(after.DeletionTimestamp) ||
			!maps.Equal(before.Annotations, after.Annotations) ||
			!maps.Equal(before.Labels, after.Labels) ||
			!sameOwners(before.OwnerReferences, after.OwnerReferences) ||
			viewOfDeploymentStatus(before) != viewOfDeploymentStatus(after)
	},
}

// deploymentStatusView is the status rolledOut reads, and readiness.
type deploymentStatusView struct {
	observedGeneration                               int64
	replicas, updated, ready, available, unavailable int32
	availableCondition                               bool
}

func viewOfDeploymentStatus(dep *appsv1.Deployment) deploymentStatusView {
	s := dep.Status
	return deploymentStatusView{
		observedGeneration: s.ObservedGeneration, replicas: s.Replicas, updated: s.UpdatedReplicas,
		ready: s.ReadyReplicas, available: s.AvailableReplicas, unavailable: s.UnavailableReplicas,
		availableCondition: deploymentAvailable(dep),
	}
}

func sameOwners(a, b []metav1.OwnerReference) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].UID != b[i].UID || ptr.Deref(a[i].Controller, false) != ptr.Deref(b[i].Controller, false) {
			return false
		}
	}
	return true
}
