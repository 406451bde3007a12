package templates

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AllowsNamespace is the one rule of a ClusterTemplate's allowedNamespaces,
// shared by the admission webhook (a Userland naming the template) and the
// controller (every reconcile, so a template that appears later or a
// selector tightened later still applies): a nil selector admits every
// namespace, otherwise the namespace's labels must match it. It returns
// the selector it applied (nil when none) for messages.
func AllowsNamespace(allowed *metav1.LabelSelector, namespaceLabels map[string]string) (bool, labels.Selector, error) {
	if allowed == nil {
		return true, nil, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(allowed)
	if err != nil {
		// The schema cannot check a selector's operators and values; an
		// invalid one admits nothing rather than everything.
		return false, nil, fmt.Errorf("invalid allowedNamespaces: %w", err)
	}
	return selector.Matches(labels.Set(namespaceLabels)), selector, nil
}

// NamespaceLabels reads a namespace's labels. It reads only metadata, so
// a cache behind r holds namespaces' metadata, not whole objects.
func NamespaceLabels(ctx context.Context, r client.Reader, namespace string) (map[string]string, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
		return nil, fmt.Errorf("getting namespace %s: %w", namespace, err)
	}
	return ns.Labels, nil
}

// NamespaceAllowed reads namespace's labels through r and applies
// AllowsNamespace; a nil selector reads nothing.
func NamespaceAllowed(ctx context.Context, r client.Reader, allowed *metav1.LabelSelector, namespace string) (bool, labels.Selector, error) {
	if allowed == nil {
		return true, nil, nil
	}
	nsLabels, err := NamespaceLabels(ctx, r, namespace)
	if err != nil {
		return false, nil, err
	}
	return AllowsNamespace(allowed, nsLabels)
}
