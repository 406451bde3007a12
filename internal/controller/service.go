package controller

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// reconcileService creates the Service with a plain create, then keeps it
// in line with a merge patch. Unlike the other children it is not applied
// server-side: Service creation was the slowest write in provisioning, and
// an apply-create cost the API server half as much again as a create
// (docs/benchmarks.md). Everything the controller sets on a Service is
// either fixed or a whole list (ports), so a merge patch expresses it
// exactly.
func (r *UserlandReconciler) reconcileService(ctx context.Context, s *reconcileState) (ctrl.Result, error) {
	desired := Service(s.ul, s.template.Spec.HTTP.Port, BindsIncarnation(s.ul, s.dep))
	hash := hashOf(desired)
	cached, err := r.getCached(ctx, client.ObjectKeyFromObject(desired), &corev1.Service{})
	if err != nil {
		return ctrl.Result{}, err
	}
	if !r.createOnce(s, "Service", desired, cached) {
		return ctrl.Result{}, nil
	}
	if cached == nil {
		desired.Annotations = map[string]string{AnnotationAppliedHash: hash}
		err := r.Client.Create(ctx, desired, client.FieldOwner(FieldOwner))
		if apierrors.IsAlreadyExists(err) {
			return r.nameConflict(s, "Service", r.existsUncached(ctx, s, desired))
		}
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("creating service %s/%s: %w", desired.Namespace, desired.Name, terminalIfNamespaceTerminating(err))
		}
		r.created.Created("Service", client.ObjectKeyFromObject(desired), s.now)
		return ctrl.Result{}, nil
	}
	existing := cached.(*corev1.Service)
	if !metav1.IsControlledBy(existing, s.ul) {
		return r.stall(s, v1alpha1.ReasonNameConflict, fmt.Sprintf("a Service named %q exists that this Userland does not own", existing.Name))
	}
	if existing.Spec.ClusterIP != corev1.ClusterIPNone {
		// A Service from before environments' Services were headless: the
		// cluster IP cannot be removed in place, so it is replaced.
		if err := r.Client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("replacing service %s/%s with a headless one: %w", existing.Namespace, existing.Name, err)
		}
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if existing.Annotations[AnnotationAppliedHash] == hash && serviceRoutesAsDesired(existing, desired) {
		return ctrl.Result{}, nil
	}
	updated := existing.DeepCopy()
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	for k, v := range desired.Labels {
		updated.Labels[k] = v
	}
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	updated.Annotations[AnnotationAppliedHash] = hash
	// An owner is given only when a claim is created under reclaimPolicy
	// Delete, never later: a claim kept under Retain must not become
	// deletable because the Userland now points at a template (or a
	// template edit) that says Delete. Releasing (switch to Retain) is safe.
	if len(desired.OwnerReferences) == 0 {
		updated.OwnerReferences = nil
	}
	updated.Spec.Type = desired.Spec.Type
	updated.Spec.Selector = desired.Spec.Selector
	updated.Spec.Ports = desired.Spec.Ports
	if err := r.Client.Patch(ctx, updated, client.MergeFrom(existing), client.FieldOwner(FieldOwner)); err != nil {
		return ctrl.Result{}, fmt.Errorf("patching service %s/%s: %w", existing.Namespace, existing.Name, terminalIfNamespaceTerminating(err))
	}
	return ctrl.Result{}, nil
}

// serviceRoutesAsDesired says whether the live Service still selects and
// exposes what the controller set. The applied hash alone is not enough:
// it records what was written, and a patch by anyone who may patch
// Services (pointing the selector at another environment's pod, say)
// leaves it alone. The gateway sends a person to the pods this Service's
// EndpointSlices list, so a changed selector would send alice to bob's
// environment until something else changed.
func serviceRoutesAsDesired(live, desired *corev1.Service) bool {
	if live.Spec.Type != desired.Spec.Type || !maps.Equal(live.Spec.Selector, desired.Spec.Selector) || len(live.Spec.Ports) != len(desired.Spec.Ports) {
		return false
	}
	for i, want := range desired.Spec.Ports {
		got := live.Spec.Ports[i]
		if got.Name != want.Name || got.Protocol != want.Protocol || got.Port != want.Port || got.TargetPort != want.TargetPort {
			return false
		}
	}
	return true
}
