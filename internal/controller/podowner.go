package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// The ReplicaSet a pod of the Deployment's own second names is read, its
// metadata only, to tell whose it is:
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get

// ownedSameSecond returns the pods that podServing cannot judge by their
// creation time (made in the Deployment's own second: timestamps have
// whole seconds) and whose controlling ReplicaSet, read from the API
// server, is the one the pod names (same UID) and is controlled by this
// Deployment (same UID). That tells this Deployment's first pod from a
// lingering pod of a deleted namesake Deployment, which names its own
// ReplicaSet. It is no defence against someone who may create pods in the
// namespace and forges the owner reference; such a pod made a second later
// counted before this check too, and the Service selects it either way.
// A Deployment's first pod is usually made within a second of it, so
// without this a new environment whose pod is Ready waited for the
// Deployment controller to say Available (0.5 to 2 s more in the
// provisioning benchmark) and, past the first-status window, was written
// Starting and then Ready.
//
// It reads only when the answer can make podServing say yes: the
// Deployment wants one replica and is not rolled out yet, and its pods,
// leaving aside those going and those made after it, are exactly one
// Ready pod of its second running its pod template. A read that fails
// leaves the pod unjudged: the Deployment's own status decides, as before.
// The reads stop once the cache shows the Deployment rolled out, so a
// new environment costs a few (its reconciles until then), and an
// environment at rest none.
func (r *UserlandReconciler) ownedSameSecond(ctx context.Context, dep *appsv1.Deployment, pods []corev1.Pod) map[types.UID]bool {
	if r.APIReader == nil || dep == nil || dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 || rolledOut(dep) {
		return nil
	}
	var candidate *corev1.Pod
	for i := range pods {
		pod := &pods[i]
		switch {
		case pod.DeletionTimestamp != nil || pod.CreationTimestamp.After(dep.CreationTimestamp.Time):
			continue
		case candidate != nil || !pod.CreationTimestamp.Equal(&dep.CreationTimestamp) || !podReady(pod) || !runsPodTemplate(dep, pod):
			// Two of the Deployment's second, an older pod, or one not
			// serving: not the one Ready pod podServing could count.
			return nil
		}
		candidate = pod
	}
	if candidate == nil || !r.ownedBy(ctx, candidate, dep) {
		return nil
	}
	return map[types.UID]bool{candidate.UID: true}
}

// ownedBy reads pod's controlling ReplicaSet (metadata only) and reports
// whether dep controls it.
func (r *UserlandReconciler) ownedBy(ctx context.Context, pod *corev1.Pod, dep *appsv1.Deployment) bool {
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "ReplicaSet" || owner.APIVersion != appsv1.SchemeGroupVersion.String() {
		return false
	}
	rs := &metav1.PartialObjectMetadata{}
	rs.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: owner.Name}, rs); err != nil {
		log := ctrl.LoggerFrom(ctx)
		if apierrors.IsForbidden(err) && r.replicaSetsForbidden.CompareAndSwap(false, true) {
			// A ClusterRole without replicasets get (an upgrade that kept
			// the old one): said once, loudly; every new environment then
			// waits for its Deployment's status, as before.
			log.Error(err, "the controller may not read ReplicaSets; new environments say Ready only once their Deployment's status does")
		}
		log.V(1).Info("reading a pod's ReplicaSet; the Deployment's status decides", "pod", pod.Name, "error", err.Error())
		return false
	}
	rsOwner := metav1.GetControllerOf(rs)
	return rs.UID == owner.UID && rsOwner != nil && rsOwner.UID == dep.UID
}

// runsPodTemplate is whether pod was made from dep's current pod template,
// by the annotations it inherits: the template hash, and the restart
// request, which changes the pod but not the hash.
func runsPodTemplate(dep *appsv1.Deployment, pod *corev1.Pod) bool {
	want := dep.Spec.Template.Annotations
	return pod.Annotations[AnnotationTemplateHash] != "" &&
		pod.Annotations[AnnotationTemplateHash] == want[AnnotationTemplateHash] &&
		pod.Annotations[v1alpha1.AnnotationRestartedAt] == want[v1alpha1.AnnotationRestartedAt]
}
