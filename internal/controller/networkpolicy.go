package controller

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func (r *UserlandReconciler) reconcileNetworkPolicy(ctx context.Context, s *reconcileState) (ctrl.Result, error) {
	desired := NetworkPolicy(s.ul, s.template.Spec, r.GatewayNamespace, r.GatewaySelector)
	cached, err := r.getCached(ctx, client.ObjectKeyFromObject(desired), &networkingv1.NetworkPolicy{})
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.apply(ctx, s, desired, cached); err != nil {
		return r.nameConflict(s, "NetworkPolicy", err)
	}
	return ctrl.Result{}, nil
}
