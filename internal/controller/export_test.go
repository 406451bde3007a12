package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OwnedBy is ownedBy for the tests against the real API server, read
// through reader (a client bound to the controller's own ClusterRole).
func OwnedBy(ctx context.Context, reader client.Reader, pod *corev1.Pod, dep *appsv1.Deployment) bool {
	r := &UserlandReconciler{APIReader: reader}
	return r.ownedBy(ctx, pod, dep)
}

// BudgetSibling is what a rollout budget decision read of one sibling.
type BudgetSibling struct {
	// Name is namespace/name.
	Name string
	// Deployment is whether the cache showed its Deployment; Replicas and
	// Hash are that Deployment's.
	Deployment bool
	Replicas   int32
	Hash       string
}

// BudgetSiblings reads templateKey's siblings as a budget decision does,
// through the reader newSiblingReader makes from c (falling back to
// reader), and says whether that reader used c's indexers. Call it before
// c starts; read it after with the function returned.
func BudgetSiblings(ctx context.Context, c cache.Informers, reader client.Reader) (indexed bool, read func(templateKey string) ([]BudgetSibling, error), err error) {
	sr, err := newSiblingReader(ctx, c, reader)
	if err != nil {
		return false, nil, err
	}
	_, indexed = sr.(indexedSiblings)
	return indexed, func(templateKey string) ([]BudgetSibling, error) {
		var got []BudgetSibling
		err := sr.siblings(ctx, templateKey, func(name types.NamespacedName, dep *appsv1.Deployment) error {
			b := BudgetSibling{Name: name.Namespace + "/" + name.Name}
			if dep != nil {
				b.Deployment, b.Replicas, b.Hash = true, ptr.Deref(dep.Spec.Replicas, 0), dep.Spec.Template.Annotations[AnnotationTemplateHash]
			}
			got = append(got, b)
			return nil
		})
		return got, err
	}, nil
}
