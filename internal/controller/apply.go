package controller

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/apiverdict"
	"github.com/userland-dev/userland/internal/reconcile"
)

// apply brings a Deployment or NetworkPolicy to desired, sending nothing
// when the cached object already carries the same applied hash: after
// convergence the controller writes nothing.
//
// A child that does not exist yet is created with a plain create: the API
// server answered an apply-create about three times slower than a create
// while a class was provisioning (docs/benchmarks.md). Later changes are
// server-side applies with one field owner; before the first of them the
// create's field ownership is converted into the apply's (csaupgrade), so
// a field the template drops is removed rather than left behind.
func (r *UserlandReconciler) apply(ctx context.Context, s *reconcileState, desired, cached client.Object) error {
	_, err := r.applyWrote(ctx, s, desired, cached)
	return err
}

// applyWrote is apply, also saying whether a write was sent.
func (r *UserlandReconciler) applyWrote(ctx context.Context, s *reconcileState, desired, cached client.Object) (bool, error) {
	kind := desired.GetObjectKind().GroupVersionKind().Kind
	if !r.createOnce(s, kind, desired, cached) {
		return false, nil
	}
	hash := hashOf(desired)
	if cached != nil && cached.GetAnnotations()[AnnotationAppliedHash] == hash {
		return false, nil
	}
	annotations := desired.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationAppliedHash] = hash
	desired.SetAnnotations(annotations)

	if cached == nil {
		err := r.Client.Create(ctx, desired.DeepCopyObject().(client.Object), client.FieldOwner(FieldOwner))
		if err == nil {
			r.created.Created(kind, client.ObjectKeyFromObject(desired), s.now)
			return true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return true, fmt.Errorf("creating %s %s/%s: %w", kind, desired.GetNamespace(), desired.GetName(), terminalIfNamespaceTerminating(err))
		}
		return false, r.existsUncached(ctx, s, desired)
	}
	if err := r.adoptCreatedFields(ctx, desired); err != nil {
		return false, err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return false, fmt.Errorf("converting %T to unstructured: %w", desired, err)
	}
	// Typed objects serialise empty status and a null creationTimestamp;
	// applying those would claim fields the controller does not manage.
	delete(u, "status")
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u, "spec", "template", "metadata", "creationTimestamp")
	obj := &unstructured.Unstructured{Object: u}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return true, fmt.Errorf("applying %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), terminalIfNamespaceTerminating(err))
	}
	return true, nil
}

// createOnce says whether a child may be written now. A child this process
// created that the cache does not show yet is not created again (the
// informer's event brings the next reconcile; s.recheck covers one deleted
// before the cache saw it); one the cache shows is no longer awaited.
func (r *UserlandReconciler) createOnce(s *reconcileState, kind string, desired, cached client.Object) bool {
	key := client.ObjectKeyFromObject(desired)
	if cached != nil {
		r.created.Observed(kind, key)
		return true
	}
	left, pending := r.created.Pending(kind, key, s.now)
	if pending {
		s.recheck = reconcile.LowestRequeue(ctrl.Result{RequeueAfter: s.recheck}, ctrl.Result{RequeueAfter: left}).RequeueAfter
	}
	return !pending
}

// errNameConflict means a child's name is taken by an object this Userland
// does not control.
var errNameConflict = errors.New("name taken by an object this Userland does not own")

// existsUncached handles a create that found the object already there
// though the cache did not show it. If it is this Userland's (or, for a
// shared child, Userland's), the cache
// lags and the object's own event brings the next reconcile, so nothing is
// written; if it is another party's, that is errNameConflict.
func (r *UserlandReconciler) existsUncached(ctx context.Context, s *reconcileState, desired client.Object) error {
	live := desired.DeepCopyObject().(client.Object)
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		return fmt.Errorf("reading %s/%s: %w", desired.GetNamespace(), desired.GetName(), err)
	}
	ours := metav1.IsControlledBy(live, s.ul)
	if len(desired.GetOwnerReferences()) == 0 {
		// A shared child (the template's NetworkPolicy) has no owner: it
		// is ours when it carries our label.
		ours = live.GetLabels()[v1alpha1.LabelManagedBy] == v1alpha1.ManagedByValue
	}
	if !ours {
		return fmt.Errorf("%s %s/%s: %w", desired.GetObjectKind().GroupVersionKind().Kind, desired.GetNamespace(), desired.GetName(), errNameConflict)
	}
	return nil
}

// nameConflict turns errNameConflict into a stalled Userland.
func (r *UserlandReconciler) nameConflict(s *reconcileState, kind string, err error) (ctrl.Result, error) {
	if errors.Is(err, errNameConflict) {
		return r.stall(s, v1alpha1.ReasonNameConflict, fmt.Sprintf("a %s named %q exists that this Userland does not own", kind, s.ul.Name))
	}
	return ctrl.Result{}, err
}

// adoptCreatedFields turns the field ownership the controller's create
// recorded (an Update entry) into ownership by its applies. The cache holds
// no managedFields, so the live object is read; the patch is sent once per
// object and guarded by its resourceVersion.
func (r *UserlandReconciler) adoptCreatedFields(ctx context.Context, desired client.Object) error {
	live := desired.DeepCopyObject().(client.Object)
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // gone meanwhile: the apply creates it
		}
		return fmt.Errorf("reading %s/%s before applying: %w", desired.GetNamespace(), desired.GetName(), err)
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(FieldOwner), FieldOwner)
	if err != nil {
		return fmt.Errorf("converting field ownership of %s/%s: %w", desired.GetNamespace(), desired.GetName(), err)
	}
	if patch == nil {
		return nil
	}
	if err := r.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("converting field ownership of %s/%s: %w", desired.GetNamespace(), desired.GetName(), err)
	}
	return nil
}

// getCached reads obj from the cache; a missing object yields nil.
func (r *UserlandReconciler) getCached(ctx context.Context, key types.NamespacedName, obj client.Object) (client.Object, error) {
	if err := r.Client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting %T %s: %w", obj, key, err)
	}
	return obj, nil
}

// terminalIfNamespaceTerminating stops retries in a namespace being deleted:
// nothing can be created there again, and the Userland goes with it.
func terminalIfNamespaceTerminating(err error) error {
	if apiverdict.NamespaceTerminating(err) {
		return crreconcile.TerminalError(err)
	}
	return err
}
