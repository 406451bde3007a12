package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/templates"
)

// SharedPolicyReconciler deletes a template's shared NetworkPolicy in a
// namespace once nothing can need it: the template is gone, no Userland in
// the namespace refers to it, no pod there carries its label, and no
// Deployment's pod template does (a Userland switched to another template
// whose rollout is deferred still runs this template's pod, and its
// ReplicaSet replaces a deleted pod with the same label).
//
// While the template exists the policy stays even when unused. Deleting it
// then would race with a Userland being created: that Userland's reconcile
// may see the policy in its cache and start a pod just as it is deleted.
// Without the template no new pod of it can be made, so nothing races. An
// unused policy selects no pod and costs one small object per namespace and
// template.
type SharedPolicyReconciler struct {
	Client client.Client
}

// Reconcile looks at one shared policy.
func (r *SharedPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var np networkingv1.NetworkPolicy
	if err := r.Client.Get(ctx, req.NamespacedName, &np); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	kind := v1alpha1.TemplateKind(np.Annotations[AnnotationTemplateKind]).OrDefault()
	name := np.Annotations[AnnotationTemplateName]
	// Only policies this controller made for a template, under the name it
	// gives them: a look-alike is left alone.
	if name == "" || np.Labels[LabelNetworkPolicy] != np.Name || naming.TemplateNetworkPolicy(kind, name) != np.Name || !np.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	exists, err := r.templateExists(ctx, kind, np.Namespace, name)
	if err != nil || exists {
		return ctrl.Result{}, err
	}
	var userlands v1alpha1.UserlandList
	if err := r.Client.List(ctx, &userlands, client.InNamespace(np.Namespace),
		client.MatchingFields{IndexTemplateKey: templates.Key(kind, np.Namespace, name)}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing userlands of %s %q in %s: %w", kind, name, np.Namespace, err)
	}
	if len(userlands.Items) > 0 {
		return ctrl.Result{}, nil // their deletion brings this back
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(np.Namespace),
		client.MatchingLabels{LabelNetworkPolicy: np.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing pods of %s/%s: %w", np.Namespace, np.Name, err)
	}
	if len(pods.Items) > 0 {
		return ctrl.Result{}, nil // a pod's deletion brings this back
	}
	var deps appsv1.DeploymentList
	if err := r.Client.List(ctx, &deps, client.InNamespace(np.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing deployments in %s: %w", np.Namespace, err)
	}
	for i := range deps.Items {
		if deps.Items[i].Spec.Template.Labels[LabelNetworkPolicy] == np.Name {
			return ctrl.Result{}, nil // its change or deletion brings this back
		}
	}
	uid := np.UID
	if err := r.Client.Delete(ctx, &np, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("deleting unused NetworkPolicy %s/%s: %w", np.Namespace, np.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("deleted the NetworkPolicy of a deleted template; nothing used it", "template", name, "kind", kind)
	return ctrl.Result{}, nil
}

func (r *SharedPolicyReconciler) templateExists(ctx context.Context, kind v1alpha1.TemplateKind, namespace, name string) (bool, error) {
	var obj client.Object = &v1alpha1.Template{}
	key := types.NamespacedName{Namespace: namespace, Name: name}
	if kind == v1alpha1.TemplateKindClusterTemplate {
		obj, key = &v1alpha1.ClusterTemplate{}, types.NamespacedName{Name: name}
	}
	err := r.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("getting %s %s: %w", kind, key, err)
	}
	return true, nil
}

// onDelete passes only deletions: what frees a policy is something going.
var onDelete = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// SetupWithManager registers the reconciler: every shared policy is looked
// at when it appears (the controller's start included), and again when its
// template, a Userland of it or a pod it selects is deleted.
func (r *SharedPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	shared := predicate.NewPredicateFuncs(func(obj client.Object) bool { return obj.GetLabels()[LabelNetworkPolicy] != "" })
	return ctrl.NewControllerManagedBy(mgr).
		Named("shared-network-policy").
		For(&networkingv1.NetworkPolicy{}, builder.WithPredicates(shared)).
		Watches(&v1alpha1.Template{}, handler.EnqueueRequestsFromMapFunc(r.policiesOfTemplate(v1alpha1.TemplateKindTemplate)), builder.WithPredicates(onDelete)).
		Watches(&v1alpha1.ClusterTemplate{}, handler.EnqueueRequestsFromMapFunc(r.policiesOfTemplate(v1alpha1.TemplateKindClusterTemplate)), builder.WithPredicates(onDelete)).
		Watches(&v1alpha1.Userland{}, handler.EnqueueRequestsFromMapFunc(policyOfUserland), builder.WithPredicates(onDelete)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(policyOfPod), builder.WithPredicates(onDelete)).
		// A Deployment that stops running the template's pods, by a new
		// pod template or by going.
		Watches(&appsv1.Deployment{}, handler.Funcs{
			UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
				if before := podTemplatePolicy(e.ObjectOld); before != "" && before != podTemplatePolicy(e.ObjectNew) {
					q.Add(ctrl.Request{NamespacedName: types.NamespacedName{Namespace: e.ObjectOld.GetNamespace(), Name: before}})
				}
			},
			DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
				if before := podTemplatePolicy(e.Object); before != "" {
					q.Add(ctrl.Request{NamespacedName: types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: before}})
				}
			},
		}).
		WithOptions(controller.Options{RateLimiter: retryLimiter()}).
		Complete(r)
}

// policiesOfTemplate maps a deleted template to its policies: the one in
// its namespace for a Template, every namespace's for a ClusterTemplate.
func (r *SharedPolicyReconciler) policiesOfTemplate(kind v1alpha1.TemplateKind) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []ctrl.Request {
		name := naming.TemplateNetworkPolicy(kind, obj.GetName())
		var list networkingv1.NetworkPolicyList
		opts := []client.ListOption{client.MatchingLabels{LabelNetworkPolicy: name}, client.UnsafeDisableDeepCopy}
		if kind == v1alpha1.TemplateKindTemplate {
			opts = append(opts, client.InNamespace(obj.GetNamespace()))
		}
		if err := r.Client.List(ctx, &list, opts...); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing the network policies of a deleted template", "template", obj.GetName())
			return nil
		}
		reqs := make([]ctrl.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
}

func policyOfUserland(_ context.Context, obj client.Object) []ctrl.Request {
	ul, ok := obj.(*v1alpha1.Userland)
	if !ok {
		return nil
	}
	name := naming.TemplateNetworkPolicy(ul.Spec.TemplateRef.Kind, ul.Spec.TemplateRef.Name)
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: ul.Namespace, Name: name}}}
}

// podTemplatePolicy is the shared policy a Deployment's pods are labelled
// for, or "".
func podTemplatePolicy(obj client.Object) string {
	dep, ok := obj.(*appsv1.Deployment)
	if !ok {
		return ""
	}
	return dep.Spec.Template.Labels[LabelNetworkPolicy]
}

func policyOfPod(_ context.Context, obj client.Object) []ctrl.Request {
	name := obj.GetLabels()[LabelNetworkPolicy]
	if name == "" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}
