package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/reconcile"
	"github.com/userland-dev/userland/internal/templates"
)

// IndexTemplateKey indexes Userlands by the template they refer to, so a
// template change finds its Userlands without a full list.
const IndexTemplateKey = "userland.dev/template-key"

// IndexUserlandByTemplate is the indexer function for IndexTemplateKey.
func IndexUserlandByTemplate(obj client.Object) []string {
	ul, ok := obj.(*v1alpha1.Userland)
	if !ok {
		return nil
	}
	return []string{templates.UserlandKey(ul)}
}

// IndexPendingTemplateKey indexes only the Userlands waiting for their
// template's update, by template: a Deployment becoming available frees
// rollout budget for those few, and finding them must not cost a walk over
// every environment of the template on each of the many Deployment events.
const IndexPendingTemplateKey = "userland.dev/pending-template-key"

// IndexPendingUserlandByTemplate is the indexer function for
// IndexPendingTemplateKey.
func IndexPendingUserlandByTemplate(obj client.Object) []string {
	ul, ok := obj.(*v1alpha1.Userland)
	if !ok || !ul.Status.UpdatePending {
		return nil
	}
	return []string{templates.UserlandKey(ul)}
}

// NamespaceAccess says whether a Userland's template lets it run in the
// Userland's namespace, and, when not, why in plain words.
type NamespaceAccess struct {
	Allowed bool
	Message string
}

// DecideNamespaceAccess applies a ClusterTemplate's allowedNamespaces to
// the labels of the namespace a Userland is in. The webhook applies the
// same rule (templates.AllowsNamespace) when a Userland is admitted, but
// only then: the template may appear later, its selector may be tightened
// and the namespace may lose a label, so the controller decides again on
// every reconcile. A Template always runs in its own namespace.
func DecideNamespaceAccess(t *templates.Resolved, namespace string, namespaceLabels map[string]string) NamespaceAccess {
	if t.Kind != v1alpha1.TemplateKindClusterTemplate {
		return NamespaceAccess{Allowed: true}
	}
	ok, selector, err := templates.AllowsNamespace(t.AllowedNamespaces, namespaceLabels)
	switch {
	case err != nil:
		return NamespaceAccess{Message: fmt.Sprintf("ClusterTemplate %q allows no namespace: %v", t.Name, err)}
	case !ok:
		return NamespaceAccess{Message: fmt.Sprintf("ClusterTemplate %q does not allow namespace %q (its allowedNamespaces selector is %s); the environment stays stopped, with its volumes kept, until it does",
			t.Name, namespace, selector)}
	}
	return NamespaceAccess{Allowed: true}
}

// enforceNamespaceAccess stops an environment whose ClusterTemplate does
// not allow its namespace. One that runs is scaled to zero through the
// Deployment phase (s.notAllowed); one that does not is left as it is, and
// nothing else is created for it (a stall). Its claims are kept either
// way: the namespace may be allowed again.
func (r *UserlandReconciler) enforceNamespaceAccess(ctx context.Context, s *reconcileState) (ctrl.Result, error) {
	if s.template.AllowedNamespaces == nil {
		return ctrl.Result{}, nil // every namespace; nothing to read
	}
	// From the cache's metadata-only namespace informer; the namespace
	// watch requeues this Userland when the labels change.
	nsLabels, err := templates.NamespaceLabels(ctx, r.Client, s.ul.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := DecideNamespaceAccess(s.template, s.ul.Namespace, nsLabels)
	if d.Allowed {
		return ctrl.Result{}, nil
	}
	f := &finding{v1alpha1.ReasonNamespaceNotAllowed, d.Message}
	if ready := meta.FindStatusCondition(s.ul.Status.Conditions, v1alpha1.ConditionReady); ready == nil || ready.Reason != f.reason {
		r.Recorder.Eventf(s.ul, nil, corev1.EventTypeWarning, f.reason, "Reconcile", f.message)
	}
	s.ul.Status.Phase, s.ul.Status.StoppedReason = v1alpha1.PhaseFailed, ""
	s.ul.Status.IdleStopTime, s.ul.Status.QueuePosition = nil, 0
	if s.dep != nil && replicas(s.dep) > 0 {
		s.notAllowed = f
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, reconcile.Stalled(f.reason, f.message)
}
