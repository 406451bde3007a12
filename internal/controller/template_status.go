package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/reconcile"
	"github.com/userland-dev/userland/internal/templates"
)

// templateStatusBatch is how long Userland changes gather before their
// template is recounted: a class of 500 starting at once then costs a
// handful of status writes instead of one per Userland event. Counts lag
// by at most this much.
const templateStatusBatch = 5 * time.Second

// TemplateStatusReconciler keeps a template's counts of Userlands, ready
// ones and pending updates. It is one narrow controller per template kind.
type TemplateStatusReconciler struct {
	// Client reads from the cache.
	Client client.Client
	// Kind is the template kind this instance reconciles.
	Kind v1alpha1.TemplateKind
	// Clock stamps condition transitions; nil: the real clock.
	Clock clock.PassiveClock

	// status writes the templates' status; SetupWithManager makes it.
	status *reconcile.StatusPatcher[client.Object, v1alpha1.TemplateStatus]
}

// templateStatus is the status of a Template or ClusterTemplate.
func templateStatus(obj client.Object) *v1alpha1.TemplateStatus {
	switch t := obj.(type) {
	case *v1alpha1.ClusterTemplate:
		return &t.Status
	case *v1alpha1.Template:
		return &t.Status
	}
	panic(fmt.Sprintf("templateStatus: %T is not a template", obj))
}

// setTemplateUpToDate sets a template's UpToDate condition from its
// counts: True when none of its environments waits for the current
// template. The message carries no counts, so a count changing does not
// change the condition.
func setTemplateUpToDate(conditions reconcile.Conditions, status *v1alpha1.TemplateStatus) {
	if status.UpdatesPending > 0 {
		conditions.False(v1alpha1.ConditionUpToDate, v1alpha1.ReasonUpdatesPending,
			"some environments wait for the current template under the rollout policy (status.updatesPending); a restart applies it at once")
		return
	}
	conditions.True(v1alpha1.ConditionUpToDate, v1alpha1.ReasonRolledOut, "every environment runs the current template")
}

// Reconcile recounts one template's Userlands and patches its status when
// the counts changed.
func (r *TemplateStatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var obj client.Object = &v1alpha1.Template{}
	if r.Kind == v1alpha1.TemplateKindClusterTemplate {
		obj = &v1alpha1.ClusterTemplate{}
	}
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.status.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var list v1alpha1.UserlandList
	key := templates.Key(r.Kind, req.Namespace, req.Name)
	// Read-only: the cache's objects are not copied.
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexTemplateKey: key}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing userlands of %s: %w", key, err)
	}
	before := obj.DeepCopyObject().(client.Object)
	status := templateStatus(obj)
	status.ObservedGeneration = obj.GetGeneration()
	status.Userlands, status.ReadyUserlands, status.UpdatesPending = int32(len(list.Items)), 0, 0
	for i := range list.Items {
		ul := &list.Items[i]
		if ul.Status.Phase == v1alpha1.PhaseReady {
			status.ReadyUserlands++
		}
		if ul.Status.UpdatePending {
			status.UpdatesPending++
		}
	}
	setTemplateUpToDate(reconcile.NewConditions(&status.Conditions, obj.GetGeneration(), r.clock()), status)
	return ctrl.Result{}, r.status.Patch(ctx, before, obj)
}

func (r *TemplateStatusReconciler) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// SetupWithManager registers the reconciler; Userland changes requeue their
// template.
func (r *TemplateStatusReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.status = reconcile.NewStatusPatcher(r.Client, strings.ToLower(string(r.Kind)), templateStatus)
	var forObj client.Object = &v1alpha1.Template{}
	if r.Kind == v1alpha1.TemplateKindClusterTemplate {
		forObj = &v1alpha1.ClusterTemplate{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("status-"+string(r.Kind)).
		// Only spec changes: the status writes this reconciler makes must
		// not bring it straight back, outside the batching window.
		For(forObj, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.Userland{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
				r.enqueueTemplateOf(e.Object, q)
			},
			// Both templates of a templateRef change must recount.
			UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
				r.enqueueTemplateOf(e.ObjectOld, q)
				r.enqueueTemplateOf(e.ObjectNew, q)
			},
			DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
				r.enqueueTemplateOf(e.Object, q)
			},
		}).
		WithOptions(controller.Options{RateLimiter: retryLimiter()}).
		Complete(r)
}

// enqueueTemplateOf queues the template of this reconciler's kind that a
// Userland refers to.
func (r *TemplateStatusReconciler) enqueueTemplateOf(obj client.Object, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
	ul, ok := obj.(*v1alpha1.Userland)
	// The schema defaults kind, so it is always set here.
	if !ok || ul.Spec.TemplateRef.Kind != r.Kind {
		return
	}
	name := types.NamespacedName{Name: ul.Spec.TemplateRef.Name}
	if r.Kind == v1alpha1.TemplateKindTemplate {
		name.Namespace = ul.Namespace
	}
	// AddAfter collapses every change within the window into one recount.
	q.AddAfter(ctrl.Request{NamespacedName: name}, templateStatusBatch)
}
