// Package controller reconciles Userlands into a Deployment, Service,
// PersistentVolumeClaims and NetworkPolicy each, and keeps their status and
// their templates' status truthful.
package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/reconcile"
	"github.com/userland-dev/userland/internal/templates"
)

// FieldOwner is the server-side apply field manager of every write the
// controller makes.
const FieldOwner = "userland-controller"

// UserlandReconciler turns a Userland into its children and status.
type UserlandReconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads past the cache, which holds only labelled children,
	// to tell a foreign object with a child's name from a cache that lags.
	APIReader client.Reader
	// Recorder emits Events on Userlands.
	Recorder recorder.EventRecorder
	// Clock is injected so idle and rollout timing is tested without
	// waiting.
	Clock clock.PassiveClock
	// Routes builds status.url and the identity variables.
	Routes Routes
	// GatewaySelector selects the gateway's pods in NetworkPolicies.
	GatewaySelector *metav1.LabelSelector
	// GatewayNamespace is the namespace those pods must be in.
	GatewayNamespace string
	// ClusterDNS is where Internet egress may resolve names; the zero
	// value means kube-system's k8s-app=kube-dns pods.
	ClusterDNS ClusterDNS
	// FirstStatusWindow is how long a new environment's first "Starting"
	// status is held back, so one Ready within it is written once.
	FirstStatusWindow time.Duration
	// RolloutIdleAfter is how long without activity makes a WhenIdle
	// rollout due.
	RolloutIdleAfter time.Duration
	// Metrics records what the reconciler does; nil disables.
	Metrics *Metrics

	inflight rolloutTracker
	// siblings is what rollout budget decisions read the template's
	// environments with; SetupWithManager makes it (siblingReader).
	siblings siblingReader
	// budgetFreed wakes a template's environments waiting for rollout
	// budget when a restart recorded here turns out not to have been
	// written; SetupWithManager makes it.
	budgetFreed chan event.GenericEvent
	// replicaSetsForbidden is set once reading a ReplicaSet was refused
	// (ownedBy), so that is logged once.
	replicaSetsForbidden atomic.Bool
	// status writes Userlands' status; SetupWithManager makes it.
	status *reconcile.StatusPatcher[*v1alpha1.Userland, v1alpha1.UserlandStatus]
	// created remembers children created but not yet in the cache.
	created reconcile.Creations
	// sharedCreate serialises creating shared children (the template's
	// NetworkPolicy in a namespace) that the cache does not show yet.
	sharedCreate sync.Mutex
	// firstStatus holds back new environments' first Starting status
	// (FirstStatusWindow); SetupWithManager makes it.
	firstStatus *reconcile.FirstStatusHold
	queue       courseQueue
}

// +kubebuilder:rbac:groups=userland.dev,resources=userlands,verbs=get;list;watch
// +kubebuilder:rbac:groups=userland.dev,resources=userlands/status,verbs=patch
// +kubebuilder:rbac:groups=userland.dev,resources=templates;clustertemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=userland.dev,resources=templates/status;clustertemplates/status,verbs=patch
// +kubebuilder:rbac:groups=userland.dev,resources=courses,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// reconcileState is what the phases of one reconcile share.
type reconcileState struct {
	ul *v1alpha1.Userland
	// conditions sets ul's conditions.
	conditions reconcile.Conditions
	template   *templates.Resolved
	// course is the Course the Userland's label names, nil when none
	// exists; role is its user's role in it.
	course *v1alpha1.Course
	role   course.Role
	dep    *appsv1.Deployment // from the cache; never mutated
	// pods are the environment's own pods, what its health is judged
	// by; labelled are all the pods carrying its name label, its own and
	// any an earlier Userland of its name left, which the NetworkPolicy
	// decisions must cover.
	pods, labelled []corev1.Pod
	now            time.Time
	// running is whether the environment should have a pod.
	running bool
	// stopReason is set when it should not.
	stopReason v1alpha1.StoppedReason
	// notAllowed is set when the template does not allow the namespace
	// and the environment still runs: the Deployment phase scales it to
	// zero (enforceNamespaceAccess).
	notAllowed *finding
	// stalled is what stopped the phases: a spec problem, which retrying
	// cannot fix, or the template awaited (waiting); nil while nothing
	// did.
	stalled *finding
	// waiting is set when what stopped the phases is awaited, and a watch
	// reports its arrival (the template appearing): the Userland is in
	// progress, not stalled.
	waiting bool
	// health is what the status phase observed of a running environment.
	health Health
	// restartSeenDone is the pod template hash at which the cache shows
	// this environment's Deployment rolled out, when it is the one wanted:
	// settleInflight forgets a restart in flight to it.
	restartSeenDone string
	// rolloutDecided is whether the Deployment phase decided UpToDate
	// (Status.UpdatePending holds the decision).
	rolloutDecided bool
	// recheck is when to look again at what the cache does not show yet:
	// a child created, or a template the API server already has (zero:
	// nothing awaited).
	recheck time.Duration
	// cacheBehind is set when the cache lacks the template the API server
	// has (a Userland created just after its template): what the phases
	// found is the cache's lag, not the truth, so no status is written.
	cacheBehind bool
}

// finding is a reason and message a phase found for the Ready condition.
type finding struct{ reason, message string }

// Reconcile fetches the Userland, then runs the phases in order; status is
// written once, at the end, and only when it changed.
func (r *UserlandReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	var current v1alpha1.Userland
	if err := r.Client.Get(ctx, req.NamespacedName, &current); err != nil {
		if apierrors.IsNotFound(err) {
			r.status.Forget(req.NamespacedName)
			r.firstStatus.Forget(req.NamespacedName)
			r.inflight.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !current.DeletionTimestamp.IsZero() {
		r.status.Forget(req.NamespacedName)
		r.firstStatus.Forget(req.NamespacedName)
		r.inflight.forget(req.NamespacedName)
		// Owned children are garbage-collected; retained claims carry no
		// owner reference and stay. Nothing to do.
		return ctrl.Result{}, nil
	}
	s := &reconcileState{ul: current.DeepCopy(), now: r.Clock.Now()}
	s.conditions = reconcile.NewConditions(&s.ul.Status.Conditions, s.ul.Generation, r.Clock)
	defer func() {
		if s.cacheBehind && retErr == nil {
			// Telling the user that a template which exists is missing
			// would be false, and a new environment's first status would
			// be spent on it; the template's event or recheck comes soon.
			return
		}
		if retErr == nil {
			s.ul.Status.ObservedGeneration = s.ul.Generation
		}
		r.summarize(s, retErr)
		if retErr == nil {
			// A new environment that becomes Ready within the window gets
			// one status write, not Starting and then Ready.
			neverWritten := current.Status.Phase == "" && current.Status.ObservedGeneration == 0
			if wait, hold := r.firstStatus.Hold(req.NamespacedName, r.Clock.Now(), neverWritten, s.ul.Status.Phase == v1alpha1.PhaseStarting); hold {
				result = reconcile.LowestRequeue(result, ctrl.Result{RequeueAfter: wait})
				return
			}
		}
		if err := r.status.Patch(ctx, &current, s.ul); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	result, stop, err := reconcile.Run(ctx, s,
		r.resolveTemplate,
		r.resolveCourse,
		r.observe,
		// Before any child is made or changed: a namespace the template
		// does not allow gets nothing new.
		r.enforceNamespaceAccess,
		r.reconcileVolumes,
		// The policy exists before any pod, so no pod is ever open to
		// other users' pods.
		r.reconcileNetworkPolicy,
		r.reconcileService,
		r.reconcileDeployment,
		// After the Deployment: the old policy goes only once the pods
		// carry the shared one's label.
		r.retireOwnPolicy,
		r.reconcileStatus,
	)
	if stop != nil {
		s.stalled, s.waiting = &finding{stop.Reason, stop.Message}, !stop.Stalled
	}
	return reconcile.LowestRequeue(result, ctrl.Result{RequeueAfter: s.recheck}), err
}

// resolveTemplate finds the referenced template, or stops with
// TemplateResolved=False until it appears (the template watch requeues).
func (r *UserlandReconciler) resolveTemplate(ctx context.Context, s *reconcileState) (ctrl.Result, error) {
	t, err := templates.Resolve(ctx, r.Client, s.ul)
	if apierrors.IsNotFound(err) {
		if r.cacheLacksTemplate(ctx, s) {
			s.cacheBehind, s.recheck = true, cacheLagRecheck
			return ctrl.Result{}, reconcile.Waiting(v1alpha1.ReasonTemplateNotFound, "waiting for the cache to show the template")
		}
		ref := s.ul.Spec.TemplateRef
		s.conditions.False(v1alpha1.ConditionTemplateResolved, v1alpha1.ReasonTemplateNotFound,
			fmt.Sprintf("%s %q does not exist", ref.Kind, ref.Name))
		if s.ul.Status.Phase == "" {
			s.ul.Status.Phase = v1alpha1.PhasePending
		}
		// The template watch reconciles again when it appears.
		return ctrl.Result{}, reconcile.Waiting(v1alpha1.ReasonTemplateNotFound, "waiting for the template")
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	s.template = t
	s.conditions.True(v1alpha1.ConditionTemplateResolved, v1alpha1.ReasonTemplateFound,
		fmt.Sprintf("%s %q found", t.Kind, t.Name))
	s.ul.Status.DisplayName = cmp.Or(t.Spec.DisplayName, t.Name)
	s.ul.Status.URL = r.Routes.URL(s.ul.Namespace, s.ul.Name, naming.Routing(t.Spec.HTTP.Routing, r.Routes.Domain != ""))
	return ctrl.Result{}, nil
}

// cacheLagRecheck is when a reconcile that found the cache behind the API
// server looks again, should the template's own event be lost.
const cacheLagRecheck = time.Second

// cacheLagLimit is how young a Userland must be for a template missing from
// the cache to be taken for the cache's lag. Past it, or when the API
// server cannot be asked, the cache's answer stands (TemplateNotFound), so
// an informer that stopped never leaves an environment without a status
// or polling once a second for good.
const cacheLagLimit = 30 * time.Second

// cacheLacksTemplate asks the API server whether the template of a young
// Userland, which the cache does not show, exists after all. One read per
// such reconcile, and only when the cache says "not found".
func (r *UserlandReconciler) cacheLacksTemplate(ctx context.Context, s *reconcileState) bool {
	if r.APIReader == nil || s.now.Sub(s.ul.CreationTimestamp.Time) > cacheLagLimit {
		return false
	}
	_, err := templates.Resolve(ctx, r.APIReader, s.ul)
	switch {
	case err == nil:
		ctrl.LoggerFrom(ctx).V(1).Info("template not in the cache yet; status held", "template", s.ul.Spec.TemplateRef.Name)
		return true
	case !apierrors.IsNotFound(err):
		// The API server's words stay in the log, not in a status anyone
		// who reads the Userland sees.
		ctrl.LoggerFrom(ctx).Error(err, "confirming that a template is missing; the cache's answer stands", "template", s.ul.Spec.TemplateRef.Name)
	}
	return false
}

// observe reads the current Deployment and Pods from the cache.
func (r *UserlandReconciler) observe(ctx context.Context, s *reconcileState) (ctrl.Result, error) {
	var dep appsv1.Deployment
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(s.ul), &dep)
	switch {
	case err == nil:
		if !metav1.IsControlledBy(&dep, s.ul) {
			return r.stall(s, v1alpha1.ReasonNameConflict, fmt.Sprintf("a Deployment named %q exists that this Userland does not own", s.ul.Name))
		}
		s.dep = &dep
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("getting deployment %s/%s: %w", s.ul.Namespace, s.ul.Name, err)
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(s.ul.Namespace), client.MatchingFields{IndexPodUserlandKey: s.ul.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing pods of %s/%s: %w", s.ul.Namespace, s.ul.Name, err)
	}
	s.labelled = pods.Items
	s.pods = s.labelled
	if BindsIncarnation(s.ul, s.dep) {
		// An earlier Userland's of this name (the garbage collector has
		// not removed them yet) say nothing of this one's health.
		s.pods = slices.DeleteFunc(slices.Clone(s.labelled), func(p corev1.Pod) bool {
			return p.Labels[v1alpha1.LabelUserlandUID] != string(s.ul.UID)
		})
	}
	return ctrl.Result{}, nil
}

// stall ends the phases on a spec problem that retrying cannot fix: the
// Userland is Failed, and Stalled.
func (r *UserlandReconciler) stall(s *reconcileState, reason, message string) (ctrl.Result, error) {
	s.ul.Status.Phase = v1alpha1.PhaseFailed
	r.Recorder.Eventf(s.ul, nil, corev1.EventTypeWarning, reason, "Reconcile", message)
	return ctrl.Result{}, reconcile.Stalled(reason, message)
}
