package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// reconcileVolumes creates each template volume's claim once. Existing
// claims are never recreated, shrunk or deleted here: only their labels,
// owner (per reclaimPolicy) and a larger size are applied. A claim that
// belongs to another user is never mounted.
func (r *UserlandReconciler) reconcileVolumes(ctx context.Context, s *reconcileState) (ctrl.Result, error) {
	for _, v := range s.template.Spec.Volumes {
		desired := Claim(s.ul, v)
		cached, err := r.getCached(ctx, client.ObjectKeyFromObject(desired), &corev1.PersistentVolumeClaim{})
		if err != nil {
			return ctrl.Result{}, err
		}
		if cached == nil {
			err := r.Client.Create(ctx, desired, client.FieldOwner(FieldOwner))
			if err == nil {
				continue
			}
			if !apierrors.IsAlreadyExists(err) {
				return ctrl.Result{}, fmt.Errorf("creating claim %s/%s: %w", desired.Namespace, desired.Name, terminalIfNamespaceTerminating(err))
			}
			// The cache holds only claims labelled as Userland's, so a
			// claim of that name it does not hold is someone else's (or
			// not cached yet): read it before deciding to mount it.
			existing := &corev1.PersistentVolumeClaim{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), existing); err != nil {
				return ctrl.Result{}, fmt.Errorf("reading claim %s/%s: %w", desired.Namespace, desired.Name, err)
			}
			cached = existing
		}
		existing := cached.(*corev1.PersistentVolumeClaim)
		if existing.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
			return r.stall(s, v1alpha1.ReasonVolumeConflict, fmt.Sprintf(
				"claim %s exists but was not made by Userland (it lacks the %s=%s label); it is not mounted: delete or rename it, or label it for this user",
				existing.Name, v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue))
		}
		if existing.Labels[LabelUser] != desired.Labels[LabelUser] {
			return r.stall(s, v1alpha1.ReasonVolumeConflict, fmt.Sprintf(
				"claim %s belongs to another user; delete it or rename this Userland", existing.Name))
		}
		if err := r.patchClaim(ctx, existing, desired); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// patchClaim brings an existing claim's mutable parts in line: labels, the
// owner reference (re-adoption, or release on a switch to Retain) and growth.
func (r *UserlandReconciler) patchClaim(ctx context.Context, existing, desired *corev1.PersistentVolumeClaim) error {
	updated := existing.DeepCopy()
	delete(updated.Labels, LabelRetained)
	for k, v := range desired.Labels {
		updated.Labels[k] = v
	}
	// An owner is given only when a claim is created under reclaimPolicy
	// Delete, never later: a claim kept under Retain must not become
	// deletable because the Userland now points at a template (or a
	// template edit) that says Delete. Releasing (switch to Retain) is safe.
	if len(desired.OwnerReferences) == 0 {
		updated.OwnerReferences = nil
	}
	want := desired.Spec.Resources.Requests[corev1.ResourceStorage]
	have := existing.Spec.Resources.Requests[corev1.ResourceStorage]
	if want.Cmp(have) > 0 {
		updated.Spec.Resources.Requests[corev1.ResourceStorage] = want
	}
	if equalClaims(existing, updated) {
		return nil
	}
	if err := r.Client.Patch(ctx, updated, client.MergeFrom(existing), client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("updating claim %s/%s: %w", existing.Namespace, existing.Name, err)
	}
	return nil
}

func equalClaims(a, b *corev1.PersistentVolumeClaim) bool {
	sa, sb := a.Spec.Resources.Requests[corev1.ResourceStorage], b.Spec.Resources.Requests[corev1.ResourceStorage]
	return fmt.Sprint(a.Labels) == fmt.Sprint(b.Labels) &&
		fmt.Sprint(a.OwnerReferences) == fmt.Sprint(b.OwnerReferences) && sa.Cmp(sb) == 0
}
