package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OwnedBy is ownedBy for the tests against the real API server, read
// through reader (a client bound to the controller's own ClusterRole).
func OwnedBy(ctx context.Context, reader client.Reader, pod *corev1.Pod, dep *appsv1.Deployment) bool {
	r := &UserlandReconciler{APIReader: reader}
	return r.ownedBy(ctx, pod, dep)
}
