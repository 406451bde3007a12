package controller

import (
	"time"

	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/reconcile"
	"github.com/userland-dev/userland/internal/templates"
)

// CacheOptions restricts the manager's cache of children to the objects
// Userland manages, so memory grows with Userlands, not with the cluster.
func CacheOptions() cache.Options {
	managed := labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})
	return cache.Options{
		// managedFields are half of a small object's size and never read
		// here: server-side apply works from the desired object alone.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:            {Label: managed, Transform: slimDeployment},
			&corev1.Service{}:               {Label: managed},
			&corev1.PersistentVolumeClaim{}: {Label: managed},
			&networkingv1.NetworkPolicy{}:   {Label: managed},
			&corev1.Pod{}:                   {Label: managed, Transform: slimPod},
			// Courses' image pullers (their status is read).
			&appsv1.DaemonSet{}: {Label: managed, Transform: slimDaemonSet},
		}}
}

// slimDeployment keeps what the reconciler reads from a Deployment — its
// metadata, replicas, pod-template annotations (template hash, restart
// request) and status — and drops the pod spec, the bulk of the object:
// whether a Deployment is current is decided by the applied hash.
func slimDeployment(obj any) (any, error) {
	dep, ok := obj.(*appsv1.Deployment)
	if !ok {
		return obj, nil
	}
	dep.ManagedFields = nil
	dep.Spec.Template.Spec = corev1.PodSpec{}
	// Of the pod labels only the shared policy's (retireOwnPolicy) and
	// the Userland's UID (BindsIncarnation) are read.
	kept := map[string]string{}
	for _, l := range []string{LabelNetworkPolicy, v1alpha1.LabelUserlandUID} {
		if v, ok := dep.Spec.Template.Labels[l]; ok {
			kept[l] = v
		}
	}
	dep.Spec.Template.Labels = nil
	if len(kept) > 0 {
		dep.Spec.Template.Labels = kept
	}
	return dep, nil
}

// slimDaemonSet keeps an image puller's metadata and status: whether it
// is current is decided by the applied hash.
func slimDaemonSet(obj any) (any, error) {
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return obj, nil
	}
	ds.ManagedFields = nil
	ds.Spec = appsv1.DaemonSetSpec{}
	return ds, nil
}

// slimPod keeps a pod's metadata and the parts of its status that health
// is judged by (conditions, container states); the spec and addresses are
// never read and are most of a pod.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.ManagedFields = nil
	pod.Spec = corev1.PodSpec{}
	pod.Status = corev1.PodStatus{
		Phase:                 pod.Status.Phase,
		Conditions:            pod.Status.Conditions,
		InitContainerStatuses: slimContainerStatuses(pod.Status.InitContainerStatuses),
		ContainerStatuses:     slimContainerStatuses(pod.Status.ContainerStatuses),
	}
	return pod, nil
}

func slimContainerStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, cs := range in {
		out[i] = corev1.ContainerStatus{Name: cs.Name, State: cs.State, Ready: cs.Ready, RestartCount: cs.RestartCount}
	}
	return out
}

// IndexPodUserlandKey indexes the cached pods by the Userland they belong
// to. The cache's own namespace index would have every reconcile walk all
// the pods of the namespace to match a label: with 5000 environments in one
// namespace that walk was most of the controller's CPU.
const IndexPodUserlandKey = "userland.dev/userland"

// IndexPodByUserland is the indexer function for IndexPodUserlandKey: the
// value of the pod's Userland label.
func IndexPodByUserland(obj client.Object) []string {
	name := obj.GetLabels()[v1alpha1.LabelUserland]
	if name == "" {
		return nil
	}
	return []string{name}
}

// SetupIndexes registers the field indexes the reconcilers rely on.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &v1alpha1.Userland{}, IndexTemplateKey, IndexUserlandByTemplate); err != nil {
		return fmt.Errorf("indexing userlands by template: %w", err)
	}
	if err := indexer.IndexField(ctx, &v1alpha1.Userland{}, IndexPendingTemplateKey, IndexPendingUserlandByTemplate); err != nil {
		return fmt.Errorf("indexing pending userlands by template: %w", err)
	}
	if err := indexer.IndexField(ctx, &v1alpha1.Userland{}, IndexCourseKey, IndexUserlandByCourse); err != nil {
		return fmt.Errorf("indexing userlands by course: %w", err)
	}
	if err := indexer.IndexField(ctx, &v1alpha1.Userland{}, IndexBudgetGroupKey, IndexUserlandByBudgetGroup); err != nil {
		return fmt.Errorf("indexing userlands by shared budget: %w", err)
	}
	if err := indexer.IndexField(ctx, &corev1.Pod{}, IndexPodUserlandKey, IndexPodByUserland); err != nil {
		return fmt.Errorf("indexing pods by userland: %w", err)
	}
	return nil
}

// The namespace watch (labels, for allowedNamespaces):
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch

// createdTTL is how long a child this process created is not created again
// while the cache does not show it; informers lag by milliseconds, seconds
// when a class starts.
const createdTTL = 5 * time.Second

// SetupWithManager registers the Userland reconciler and its watches.
func (r *UserlandReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	r.status = reconcile.NewStatusPatcher(r.Client, "userland", func(ul *v1alpha1.Userland) *v1alpha1.UserlandStatus { return &ul.Status })
	r.firstStatus = &reconcile.FirstStatusHold{Window: r.FirstStatusWindow}
	r.created.TTL = createdTTL
	r.budgetFreed = make(chan event.GenericEvent, 256)
	siblings, err := newSiblingReader(context.Background(), mgr.GetCache(), r.Client)
	if err != nil {
		return err
	}
	r.siblings = siblings
	if _, indexed := siblings.(indexedSiblings); !indexed {
		// Correct, but each budget decision then copies every sibling.
		mgr.GetLogger().Info("rollout budget decisions read through the cached client: the cache's informers expose no indexer")
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("userland").
		For(&v1alpha1.Userland{}).
		Owns(&appsv1.Deployment{}, builder.WithPredicates(deploymentSeenChanged)).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.NetworkPolicy{}).
		// A shared policy deleted or changed by someone else is put back by
		// the next of its Userlands.
		Watches(&networkingv1.NetworkPolicy{}, r.sharedPolicyEvents(),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(userlandOfLabelled), builder.WithPredicates(podSeenChanged)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(userlandOfLabelled)).
		Watches(&v1alpha1.Template{}, handler.EnqueueRequestsFromMapFunc(r.userlandsOfTemplate(v1alpha1.TemplateKindTemplate)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.ClusterTemplate{}, handler.EnqueueRequestsFromMapFunc(r.userlandsOfTemplate(v1alpha1.TemplateKindClusterTemplate)),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A sibling rolled out, stopped or gone frees Immediate rollout
		// budget.
		Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(r.pendingSiblings), builder.WithPredicates(freesRolloutPlace)).
		// One deleted or moved to another template frees any budget it
		// held under the template it leaves: its Deployment and its
		// restart stop counting once it is no longer listed there, and
		// its Deployment's own events now name another template or none.
		// An update is mapped for both its old object (the template left,
		// whose waiting are woken) and its new one.
		Watches(&v1alpha1.Userland{}, handler.EnqueueRequestsFromMapFunc(r.pendingSiblingsOfUserland), builder.WithPredicates(leavesTemplate)).
		// A restart recorded but not written frees its place too.
		WatchesRawSource(source.Channel(r.budgetFreed, handler.EnqueueRequestsFromMapFunc(r.pendingSiblingsOfUserland))).
		// One stopping frees a place in its course's queue.
		Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(r.queuedOfCourse), builder.WithPredicates(scaledDown)).
		// One joining or leaving a queue moves the others' places.
		Watches(&v1alpha1.Userland{}, handler.EnqueueRequestsFromMapFunc(r.queuedSiblings), builder.WithPredicates(queueChanged)).
		Watches(&v1alpha1.Course{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []ctrl.Request {
			return r.userlandsOfCourse(ctx, obj.GetNamespace(), obj.GetName(), false)
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// One of a student's environments starting, stopping or given
		// hours moves when the others sharing its budget run out.
		Watches(&v1alpha1.Userland{}, handler.EnqueueRequestsFromMapFunc(r.budgetSharersOf), builder.WithPredicates(usageChanged)).
		// A namespace's labels decide which ClusterTemplates it may run
		// (allowedNamespaces). Metadata only: labels are all it needs.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.clusterTemplateUserlandsOfNamespace),
			builder.OnlyMetadata, builder.WithPredicates(labelsChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, RateLimiter: retryLimiter()}).
		Complete(r)
}

// Retries after an error: 5 ms doubling per failure of the same object, at
// most maxRetryDelay apart, with no rate shared by all objects.
// controller-runtime's default also shares a 10-per-second bucket among
// every object's retries and lets one object's delay grow to 16 minutes:
// after an API server outage at a class start, a thousand environments'
// retries would trickle back at ten a second, and an object that failed
// eighteen times would wait a quarter of an hour. The client's own rate
// limit (--kube-api-qps) is what protects the API server.
func retryLimiter() workqueue.TypedRateLimiter[ctrl.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[ctrl.Request](5*time.Millisecond, maxRetryDelay)
}

// maxRetryDelay bounds how long an object that keeps failing waits.
const maxRetryDelay = time.Minute

// sharedPolicyEvents enqueues a shared policy's Userlands on its events.
// Its deletion also ends any wait for its creation (r.created): a policy
// deleted before the cache showed it is created again by the next
// reconcile, not left missing until the memo's TTL while pods start.
func (r *UserlandReconciler) sharedPolicyEvents() handler.EventHandler {
	enqueue := handler.EnqueueRequestsFromMapFunc(r.userlandsOfSharedPolicy)
	return handler.Funcs{
		CreateFunc:  enqueue.Create,
		UpdateFunc:  enqueue.Update,
		GenericFunc: enqueue.Generic,
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			r.created.Observed("NetworkPolicy", client.ObjectKeyFromObject(e.Object))
			enqueue.Delete(ctx, e, q)
		},
	}
}

// userlandsOfSharedPolicy maps a shared NetworkPolicy to the Userlands of
// its template in its namespace.
func (r *UserlandReconciler) userlandsOfSharedPolicy(ctx context.Context, obj client.Object) []ctrl.Request {
	kind, name := obj.GetAnnotations()[AnnotationTemplateKind], obj.GetAnnotations()[AnnotationTemplateName]
	if obj.GetLabels()[LabelNetworkPolicy] == "" || name == "" {
		return nil
	}
	key := templates.Key(v1alpha1.TemplateKind(kind), obj.GetNamespace(), name)
	var list v1alpha1.UserlandList
	if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{IndexTemplateKey: key}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the userlands of a shared network policy", "policy", client.ObjectKeyFromObject(obj))
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// userlandOfLabelled maps a labelled child (pods, claims) to its Userland.
func userlandOfLabelled(_ context.Context, obj client.Object) []ctrl.Request {
	name := obj.GetLabels()[v1alpha1.LabelUserland]
	if name == "" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

func (r *UserlandReconciler) userlandsOfTemplate(kind v1alpha1.TemplateKind) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []ctrl.Request {
		return r.requestsFor(ctx, templates.Key(kind, obj.GetNamespace(), obj.GetName()), false)
	}
}

func (r *UserlandReconciler) requestsFor(ctx context.Context, key string, onlyPending bool) []ctrl.Request {
	index := IndexTemplateKey
	if onlyPending {
		index = IndexPendingTemplateKey
	}
	var list v1alpha1.UserlandList
	// Read-only: the cache's objects are not copied.
	if err := r.Client.List(ctx, &list, client.MatchingFields{index: key}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing userlands of template", "template", key)
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// pendingSiblings maps a Deployment to the Userlands of the same template
// still waiting for an update.
func (r *UserlandReconciler) pendingSiblings(ctx context.Context, obj client.Object) []ctrl.Request {
	ul := r.userlandOfChild(ctx, obj)
	if ul == nil {
		return nil
	}
	return r.requestsFor(ctx, templates.UserlandKey(ul), true)
}

// pendingSiblingsOfUserland maps a Userland (deleted, or whose restart
// was not written) to those of its template still waiting for an update.
func (r *UserlandReconciler) pendingSiblingsOfUserland(ctx context.Context, obj client.Object) []ctrl.Request {
	ul, ok := obj.(*v1alpha1.Userland)
	if !ok {
		return nil
	}
	return r.requestsFor(ctx, templates.UserlandKey(ul), true)
}

// userlandOfChild reads, from the cache, the Userland a labelled child
// belongs to; nil when there is none.
func (r *UserlandReconciler) userlandOfChild(ctx context.Context, obj client.Object) *v1alpha1.Userland {
	name := obj.GetLabels()[v1alpha1.LabelUserland]
	if name == "" {
		return nil
	}
	var ul v1alpha1.Userland
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, &ul); err != nil {
		return nil
	}
	return &ul
}

// scaledDown passes Deployments that stopped having a replica (or went),
// the only Deployment events that free a place in a course's queue.
var scaledDown = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return replicas(e.ObjectOld) > 0 && replicas(e.ObjectNew) == 0
	},
}

func replicas(obj client.Object) int32 {
	if dep, ok := obj.(*appsv1.Deployment); ok && dep.Spec.Replicas != nil {
		return *dep.Spec.Replicas
	}
	return 0
}

// labelsChanged passes namespace label changes only. A namespace's
// creation needs no event: it has no Userlands yet, and the reconciles at
// start-up cover every existing one.
var labelsChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	},
}

// clusterTemplateUserlandsOfNamespace maps a namespace to its Userlands
// of ClusterTemplates, the only ones its labels concern.
func (r *UserlandReconciler) clusterTemplateUserlandsOfNamespace(ctx context.Context, obj client.Object) []ctrl.Request {
	var list v1alpha1.UserlandList
	// Read-only: the cache's objects are not copied.
	if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetName()), client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing userlands of namespace", "namespace", obj.GetName())
		return nil
	}
	var reqs []ctrl.Request
	for i := range list.Items {
		if list.Items[i].Spec.TemplateRef.Kind == v1alpha1.TemplateKindClusterTemplate {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}
