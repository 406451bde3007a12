package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// budgetView is what the cache showed, at one moment, of one template's
// environments that a rollout budget decision reads: how many run, how
// many of those count against the budget, and each one's Deployment.
//
// A decision reads a view whole, never part from one moment and part from
// another: a sibling's restart in flight is judged by the same view that
// counted (or did not count) its Deployment, so it is counted once. A view
// is the cache as it was a moment ago, which a decision already tolerates
// (the cache is itself behind the API server); the restarts this process
// started since are counted from the tracker, as before.
type budgetView struct {
	generation uint64
	running    int
	counted    int
	siblings   map[types.NamespacedName]sibling
}

// budgetViews keeps each template's view until anything it shows may have
// changed: a Deployment's replicas, its pod template hash or whether it
// counts against the budget; a Userland made, deleted or moved to another
// template. Any such event ends every view (generation). At 10,000
// environments of one template a view is 10,000 reads; decisions come far
// more often than such changes while a rollout waits for places.
type budgetViews struct {
	generation atomic.Uint64

	mu         sync.Mutex
	byTemplate map[string]*budgetView
}

// changed ends every view taken before it.
func (b *budgetViews) changed() { b.generation.Add(1) }

// get returns template's view, reading it with read when there is none
// taken since the last change. A nil b keeps nothing: every decision
// reads afresh (a reconciler without the watches that end views).
func (b *budgetViews) get(template string, read func() (*budgetView, error)) (*budgetView, error) {
	if b == nil {
		return read()
	}
	// Loaded before the read: a change during it leaves the view stale at
	// once, never current.
	generation := b.generation.Load()
	b.mu.Lock()
	if v, ok := b.byTemplate[template]; ok && v.generation == generation {
		b.mu.Unlock()
		return v, nil
	}
	b.mu.Unlock()
	v, err := read()
	if err != nil {
		return nil, err
	}
	v.generation = generation
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byTemplate == nil {
		b.byTemplate = map[string]*budgetView{}
	}
	// Stale views go, so templates no longer decided on leave nothing.
	for key, old := range b.byTemplate {
		if old.generation != generation {
			delete(b.byTemplate, key)
		}
	}
	b.byTemplate[template] = v
	return v, nil
}

// endsViews is an event handler that ends every view; it enqueues nothing.
func (b *budgetViews) endsViews() handler.TypedEventHandler[client.Object, reconcile.Request] {
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(context.Context, event.TypedCreateEvent[client.Object], workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			b.changed()
		},
		UpdateFunc: func(context.Context, event.TypedUpdateEvent[client.Object], workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			b.changed()
		},
		DeleteFunc: func(context.Context, event.TypedDeleteEvent[client.Object], workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			b.changed()
		},
		GenericFunc: func(context.Context, event.TypedGenericEvent[client.Object], workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			b.changed()
		},
	}
}

// changesBudgetView passes the Deployment events that may change what a
// view shows of it: its creation and deletion, and an update of its
// replicas' being above zero, its pod template hash, or whether it counts
// against the budget (which follows its status).
var changesBudgetView = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*appsv1.Deployment)
		after, ok2 := e.ObjectNew.(*appsv1.Deployment)
		return !ok1 || !ok2 || viewOfDeployment(before) != viewOfDeployment(after)
	},
}

// deploymentInView is what a view holds of a Deployment.
type deploymentInView struct {
	running, counts bool
	hash            string
}

func viewOfDeployment(dep *appsv1.Deployment) deploymentInView {
	return deploymentInView{
		running: dep.Spec.Replicas != nil && *dep.Spec.Replicas > 0,
		counts:  countsAgainstBudget(dep),
		hash:    dep.Spec.Template.Annotations[AnnotationTemplateHash],
	}
}

// changesTemplateMembership passes the Userland events that change which
// template lists it: its creation, deletion and a move (leavesTemplate).
var changesTemplateMembership = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return true },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc:  leavesTemplate.UpdateFunc,
}

// readBudgetView reads template's environments and their Deployments from
// the cache.
func (r *UserlandReconciler) readBudgetView(ctx context.Context, template string) (*budgetView, error) {
	var list v1alpha1.UserlandList
	// Read-only: the cache's objects are not copied.
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexTemplateKey: template}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing userlands of %s: %w", template, err)
	}
	v := &budgetView{siblings: make(map[types.NamespacedName]sibling, len(list.Items))}
	// One Deployment read into, not one allocated per sibling; read-only.
	var dep appsv1.Deployment
	for i := range list.Items {
		key := client.ObjectKeyFromObject(&list.Items[i])
		dep = appsv1.Deployment{} // a reader that decodes into it must not merge
		if err := r.Client.Get(ctx, key, &dep, client.UnsafeDisableDeepCopy); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("getting deployment %s/%s: %w", key.Namespace, key.Name, err)
			}
			v.siblings[key] = sibling{}
			continue
		}
		seen := viewOfDeployment(&dep)
		info := sibling{shown: true, hash: seen.hash}
		if seen.running {
			v.running++
			if seen.counts {
				v.counted++
				info.counted = true
			}
		}
		v.siblings[key] = info
	}
	return v, nil
}

// budgetViewOf is the view of s's template.
func (r *UserlandReconciler) budgetViewOf(ctx context.Context, s *reconcileState) (*budgetView, error) {
	key := s.template.Key
	return r.budgetViews.get(key, func() (*budgetView, error) { return r.readBudgetView(ctx, key) })
}
