package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
// whole seconds) and that the API server shows are the Deployment's: the
// pod's controlling ReplicaSet is the one it names (same UID), and that
// ReplicaSet's controller is this Deployment (same UID). A Deployment's
// first pod is usually made within a second of it, so without this a new
// environment whose pod is Ready waited for the Deployment controller to
// say Available (0.5 to 2 s more in the provisioning benchmark) and, past
// the first-status window, was written Starting and then Ready.
//
// It reads only when that can decide the phase: the Deployment not rolled
// out, and every pod that is not leaving either made after the Deployment
// or a Ready pod of its second running its pod template. A read that fails
// leaves the pod unjudged: the Deployment's own status decides, as before.
func (r *UserlandReconciler) ownedSameSecond(ctx context.Context, dep *appsv1.Deployment, pods []corev1.Pod) map[types.UID]bool {
	if r.APIReader == nil || dep == nil || rolledOut(dep) {
		return nil
	}
	var candidates []*corev1.Pod
	for i := range pods {
		pod := &pods[i]
		switch {
		case pod.DeletionTimestamp != nil || pod.CreationTimestamp.After(dep.CreationTimestamp.Time):
			continue
		case !pod.CreationTimestamp.Equal(&dep.CreationTimestamp) || !podReady(pod) || !runsPodTemplate(dep, pod):
			return nil // an older pod, or one not serving: podServing says no whatever is read
		}
		candidates = append(candidates, pod)
	}
	var owned map[types.UID]bool
	for _, pod := range candidates {
		if !r.ownedBy(ctx, pod, dep) {
			return nil
		}
		if owned == nil {
			owned = map[types.UID]bool{}
		}
		owned[pod.UID] = true
	}
	return owned
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
		ctrl.LoggerFrom(ctx).V(1).Info("reading a pod's ReplicaSet; the Deployment's status decides", "pod", pod.Name, "error", err.Error())
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
