package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// apply brings a Deployment or NetworkPolicy to desired, sending nothing
// when the cached object already carries the same applied hash: after
// convergence the controller writes nothing.
//
// A child that does not exist yet is created with a plain create: the API
// server answered an apply-create about three times slower than a create
// while a class was provisioning (docs/benchmarks.md). Later changes are
// server-side applies with one field owner; before the first of them the
// create's field ownership is converted into the apply's (csaupgrade), so
// a field the template drops is removed rather than left behind.
func (r *UserlandReconciler) apply(ctx context.Context, s *reconcileState, desired, cached client.Object) error {
	hash := hashOf(desired)
	if cached != nil && cached.GetAnnotations()[AnnotationAppliedHash] == hash {
		return nil
	}
	annotations := desired.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationAppliedHash] = hash
	desired.SetAnnotations(annotations)

	kind := desired.GetObjectKind().GroupVersionKind().Kind
	if cached == nil {
		err := r.Client.Create(ctx, desired.DeepCopyObject().(client.Object), client.FieldOwner(FieldOwner))
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s/%s: %w", kind, desired.GetNamespace(), desired.GetName(), terminalIfNamespaceTerminating(err))
		}
		return r.existsUncached(ctx, s, desired)
	}
	if err := r.adoptCreatedFields(ctx, desired); err != nil {
		return err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return fmt.Errorf("converting %T to unstructured: %w", desired, err)
	}
	// Typed objects serialise empty status and a null creationTimestamp;
	// applying those would claim fields the controller does not manage.
	delete(u, "status")
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u, "spec", "template", "metadata", "creationTimestamp")
	obj := &unstructured.Unstructured{Object: u}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), terminalIfNamespaceTerminating(err))
	}
	return nil
}

// errNameConflict means a child's name is taken by an object this Userland
// does not control.
var errNameConflict = errors.New("name taken by an object this Userland does not own")

// existsUncached handles a create that found the object already there
// though the cache did not show it. If it is this Userland's, the cache
// lags and the object's own event brings the next reconcile, so nothing is
// written; if it is another party's, that is errNameConflict.
func (r *UserlandReconciler) existsUncached(ctx context.Context, s *reconcileState, desired client.Object) error {
	live := desired.DeepCopyObject().(client.Object)
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		return fmt.Errorf("reading %s/%s: %w", desired.GetNamespace(), desired.GetName(), err)
	}
	if !metav1.IsControlledBy(live, s.ul) {
		return fmt.Errorf("%s %s/%s: %w", desired.GetObjectKind().GroupVersionKind().Kind, desired.GetNamespace(), desired.GetName(), errNameConflict)
	}
	return nil
}

// nameConflict turns errNameConflict into a stalled Userland.
func (r *UserlandReconciler) nameConflict(s *reconcileState, kind string, err error) (ctrl.Result, error) {
	if errors.Is(err, errNameConflict) {
		return r.stall(s, v1alpha1.ReasonNameConflict, fmt.Sprintf("a %s named %q exists that this Userland does not own", kind, s.ul.Name)), nil
	}
	return ctrl.Result{}, err
}

// adoptCreatedFields turns the field ownership the controller's create
// recorded (an Update entry) into ownership by its applies. The cache holds
// no managedFields, so the live object is read; the patch is sent once per
// object and guarded by its resourceVersion.
func (r *UserlandReconciler) adoptCreatedFields(ctx context.Context, desired client.Object) error {
	live := desired.DeepCopyObject().(client.Object)
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // gone meanwhile: the apply creates it
		}
		return fmt.Errorf("reading %s/%s before applying: %w", desired.GetNamespace(), desired.GetName(), err)
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(FieldOwner), FieldOwner)
	if err != nil {
		return fmt.Errorf("converting field ownership of %s/%s: %w", desired.GetNamespace(), desired.GetName(), err)
	}
	if patch == nil {
		return nil
	}
	if err := r.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("converting field ownership of %s/%s: %w", desired.GetNamespace(), desired.GetName(), err)
	}
	return nil
}

// getCached reads obj from the cache; a missing object yields nil.
func (r *UserlandReconciler) getCached(ctx context.Context, key types.NamespacedName, obj client.Object) (client.Object, error) {
	if err := r.Client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting %T %s: %w", obj, key, err)
	}
	return obj, nil
}

// reconcileVolumes creates each template volume's claim once. Existing
// claims are never recreated, shrunk or deleted here: only their labels,
// owner (per reclaimPolicy) and a larger size are applied. A claim that
// belongs to another user is never mounted.
func (r *UserlandReconciler) reconcileVolumes(ctx context.Context, s *reconcileState) (ctrl.Result, error) {
	for _, v := range s.template.Spec.Volumes {
		desired := Claim(s.ul, v)
		cached, err := r.getCached(ctx, client.ObjectKeyFromObject(desired), &corev1.PersistentVolumeClaim{})
		if err != nil {
			return ctrl.Result{}, err
		}
		if cached == nil {
			err := r.Client.Create(ctx, desired, client.FieldOwner(FieldOwner))
			if err == nil {
				continue
			}
			if !apierrors.IsAlreadyExists(err) {
				return ctrl.Result{}, fmt.Errorf("creating claim %s/%s: %w", desired.Namespace, desired.Name, terminalIfNamespaceTerminating(err))
			}
			// The cache holds only claims labelled as Userland's, so a
			// claim of that name it does not hold is someone else's (or
			// not cached yet): read it before deciding to mount it.
			existing := &corev1.PersistentVolumeClaim{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), existing); err != nil {
				return ctrl.Result{}, fmt.Errorf("reading claim %s/%s: %w", desired.Namespace, desired.Name, err)
			}
			cached = existing
		}
		existing := cached.(*corev1.PersistentVolumeClaim)
		if existing.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
			return r.stall(s, v1alpha1.ReasonVolumeConflict, fmt.Sprintf(
				"claim %s exists but was not made by Userland (it lacks the %s=%s label); it is not mounted: delete or rename it, or label it for this user",
				existing.Name, v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue)), nil
		}
		if existing.Labels[LabelUser] != desired.Labels[LabelUser] {
			return r.stall(s, v1alpha1.ReasonVolumeConflict, fmt.Sprintf(
				"claim %s belongs to another user; delete it or rename this Userland", existing.Name)), nil
		}
		if err := r.patchClaim(ctx, existing, desired); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// patchClaim brings an existing claim's mutable parts in line: labels, the
// owner reference (re-adoption, or release on a switch to Retain) and growth.
func (r *UserlandReconciler) patchClaim(ctx context.Context, existing, desired *corev1.PersistentVolumeClaim) error {
	updated := existing.DeepCopy()
	delete(updated.Labels, LabelRetained)
	for k, v := range desired.Labels {
		updated.Labels[k] = v
	}
	// An owner is given only when a claim is created under reclaimPolicy
	// Delete, never later: a claim kept under Retain must not become
	// deletable because the Userland now points at a template (or a
	// template edit) that says Delete. Releasing (switch to Retain) is safe.
	if len(desired.OwnerReferences) == 0 {
		updated.OwnerReferences = nil
	}
	want := desired.Spec.Resources.Requests[corev1.ResourceStorage]
	have := existing.Spec.Resources.Requests[corev1.ResourceStorage]
	if want.Cmp(have) > 0 {
		updated.Spec.Resources.Requests[corev1.ResourceStorage] = want
	}
	if equalClaims(existing, updated) {
		return nil
	}
	if err := r.Client.Patch(ctx, updated, client.MergeFrom(existing), client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("updating claim %s/%s: %w", existing.Namespace, existing.Name, err)
	}
	return nil
}

func equalClaims(a, b *corev1.PersistentVolumeClaim) bool {
	sa, sb := a.Spec.Resources.Requests[corev1.ResourceStorage], b.Spec.Resources.Requests[corev1.ResourceStorage]
	return fmt.Sprint(a.Labels) == fmt.Sprint(b.Labels) &&
		fmt.Sprint(a.OwnerReferences) == fmt.Sprint(b.OwnerReferences) && sa.Cmp(sb) == 0
}

// reconcileService creates the Service with a plain create, then keeps it
// in line with a merge patch. Unlike the other children it is not applied
// server-side: Service creation was the slowest write in provisioning, and
// an apply-create cost the API server half as much again as a create
// (docs/benchmarks.md). Everything the controller sets on a Service is
// either fixed or a whole list (ports), so a merge patch expresses it
// exactly.
func (r *UserlandReconciler) reconcileService(ctx context.Context, s *reconcileState) (ctrl.Result, error) {
	desired := Service(s.ul, s.template.Spec.HTTP.Port)
	hash := hashOf(desired)
	cached, err := r.getCached(ctx, client.ObjectKeyFromObject(desired), &corev1.Service{})
	if err != nil {
		return ctrl.Result{}, err
	}
	if cached == nil {
		desired.Annotations = map[string]string{AnnotationAppliedHash: hash}
		err := r.Client.Create(ctx, desired, client.FieldOwner(FieldOwner))
		if apierrors.IsAlreadyExists(err) {
			return r.nameConflict(s, "Service", r.existsUncached(ctx, s, desired))
		}
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("creating service %s/%s: %w", desired.Namespace, desired.Name, terminalIfNamespaceTerminating(err))
		}
		return ctrl.Result{}, nil
	}
	existing := cached.(*corev1.Service)
	if !metav1.IsControlledBy(existing, s.ul) {
		return r.stall(s, v1alpha1.ReasonNameConflict, fmt.Sprintf("a Service named %q exists that this Userland does not own", existing.Name)), nil
	}
	if existing.Spec.ClusterIP != corev1.ClusterIPNone {
		// A Service from before environments' Services were headless: the
		// cluster IP cannot be removed in place, so it is replaced.
		if err := r.Client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("replacing service %s/%s with a headless one: %w", existing.Namespace, existing.Name, err)
		}
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if existing.Annotations[AnnotationAppliedHash] == hash {
		return ctrl.Result{}, nil
	}
	updated := existing.DeepCopy()
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	for k, v := range desired.Labels {
		updated.Labels[k] = v
	}
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	updated.Annotations[AnnotationAppliedHash] = hash
	// An owner is given only when a claim is created under reclaimPolicy
	// Delete, never later: a claim kept under Retain must not become
	// deletable because the Userland now points at a template (or a
	// template edit) that says Delete. Releasing (switch to Retain) is safe.
	if len(desired.OwnerReferences) == 0 {
		updated.OwnerReferences = nil
	}
	updated.Spec.Type = desired.Spec.Type
	updated.Spec.Selector = desired.Spec.Selector
	updated.Spec.Ports = desired.Spec.Ports
	if err := r.Client.Patch(ctx, updated, client.MergeFrom(existing), client.FieldOwner(FieldOwner)); err != nil {
		return ctrl.Result{}, fmt.Errorf("patching service %s/%s: %w", existing.Namespace, existing.Name, terminalIfNamespaceTerminating(err))
	}
	return ctrl.Result{}, nil
}

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

func parseTime(s string) *time.Time {
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil
	}
	return &t
}

// reconcileDeployment decides whether the environment runs (suspend, idle)
// and which pod template it runs (rollout policy), then applies it.
func (r *UserlandReconciler) reconcileDeployment(ctx context.Context, s *reconcileState) (ctrl.Result, error) {
	var annotations map[string]string
	wasRunning := false
	if s.dep != nil {
		annotations = s.dep.Annotations
		wasRunning = s.dep.Spec.Replicas != nil && *s.dep.Spec.Replicas > 0
	}
	startedAt := parseTime(annotations[AnnotationStartedAt])
	idleStoppedAt := parseTime(annotations[AnnotationIdleStoppedAt])
	var lastActivity *time.Time
	if s.ul.Status.LastActivityTime != nil {
		lastActivity = &s.ul.Status.LastActivityTime.Time
	}
	// A restart or start request is someone wanting the environment now:
	// it counts as activity, so it also wakes an idle-stopped one.
	if requested := parseTime(s.ul.Annotations[v1alpha1.AnnotationRestartedAt]); requested != nil && (lastActivity == nil || requested.After(*lastActivity)) {
		lastActivity = requested
	}

	var result ctrl.Result
	next := map[string]string{}
	switch {
	case s.ul.Spec.Suspend:
		s.running, s.stopReason = false, v1alpha1.StoppedSuspended
	default:
		in := IdleInput{Now: s.now, LastActivity: lastActivity, IdleStoppedAt: idleStoppedAt}
		if startedAt != nil {
			in.StartedAt = *startedAt
		} else {
			in.StartedAt = s.now
		}
		if s.template.Spec.Idle != nil {
			in.Timeout = &s.template.Spec.Idle.Timeout.Duration
		}
		d := DecideIdle(in)
		s.running = d.Running
		result.RequeueAfter = d.RequeueAfter
		switch {
		case d.Stop:
			next[AnnotationIdleStoppedAt] = s.now.UTC().Format(time.RFC3339)
			r.Recorder.Eventf(s.ul, nil, corev1.EventTypeNormal, "IdleStopped", "Stop",
				"stopped after %s without activity", s.template.Spec.Idle.Timeout.Duration)
			r.Metrics.idleStop()
		case !d.Running:
			next[AnnotationIdleStoppedAt] = idleStoppedAt.UTC().Format(time.RFC3339)
		case d.Wake:
			r.Recorder.Eventf(s.ul, nil, corev1.EventTypeNormal, "Woken", "Start", "started by activity after an idle stop")
		}
		if !s.running {
			s.stopReason = v1alpha1.StoppedIdle
		}
	}
	if s.running {
		if wasRunning && startedAt != nil {
			next[AnnotationStartedAt] = startedAt.UTC().Format(time.RFC3339)
		} else {
			next[AnnotationStartedAt] = s.now.UTC().Format(time.RFC3339)
		}
	}

	desiredPod := PodTemplate(s.ul, s.template.Spec, r.Routes)
	pod, pending, requeue, err := r.choosePodTemplate(ctx, s, desiredPod, wasRunning, startedAt, lastActivity)
	if err != nil {
		return ctrl.Result{}, err
	}
	result = lowestRequeue(result, ctrl.Result{RequeueAfter: requeue})
	s.ul.Status.UpdatePending, s.rolloutDecided = pending, true

	if pending {
		// Deferral happens only while the environment keeps running, so
		// the Deployment needs no change at all until the rollout is due.
		return result, nil
	}
	replicas := int32(0)
	if s.running {
		replicas = 1
	}
	desired := Deployment(s.ul, pod, replicas, next)
	var cached client.Object
	if s.dep != nil {
		cached = s.dep
	}
	if err := r.apply(ctx, s, desired, cached); err != nil {
		return r.nameConflict(s, "Deployment", err)
	}
	if s.running && !wasRunning && s.dep != nil {
		r.Recorder.Eventf(s.ul, nil, corev1.EventTypeNormal, "Started", "Start", "environment scaled up")
	}
	if !s.running && wasRunning {
		r.Recorder.Eventf(s.ul, nil, corev1.EventTypeNormal, "Stopped", "Stop", "environment scaled to zero (%s)", s.stopReason)
	}
	return result, nil
}

// choosePodTemplate applies the rollout policy: the new pod template, or
// pending when the change is deferred and the Deployment is left as it is.
func (r *UserlandReconciler) choosePodTemplate(ctx context.Context, s *reconcileState, desired corev1.PodTemplateSpec,
	wasRunning bool, startedAt, lastActivity *time.Time) (pod corev1.PodTemplateSpec, pending bool, requeue time.Duration, err error) {
	if s.dep == nil {
		return desired, false, 0, nil
	}
	current := s.dep.Spec.Template.Annotations[AnnotationTemplateHash]
	outdated := current != desired.Annotations[AnnotationTemplateHash]
	key := types.NamespacedName{Namespace: s.ul.Namespace, Name: s.ul.Name}
	if !outdated {
		if rolledOut(s.dep) {
			r.inflight.done(s.template.Key, key)
		}
		return desired, false, 0, nil
	}
	if requested := desired.Annotations[v1alpha1.AnnotationRestartedAt]; requested != s.dep.Spec.Template.Annotations[v1alpha1.AnnotationRestartedAt] {
		// An explicit restart applies the pending change whatever the
		// policy: someone asked for exactly this.
		r.Metrics.rolloutApplied()
		r.Recorder.Eventf(s.ul, nil, corev1.EventTypeNormal, "RolledOut", "Restart", "applied the current template on request")
		return desired, false, 0, nil
	}
	lastActive := s.now
	if startedAt != nil {
		lastActive = *startedAt
	}
	if lastActivity != nil && lastActivity.After(lastActive) {
		lastActive = *lastActivity
	}
	in := RolloutInput{
		Policy: s.template.Spec.Rollout.Policy, Outdated: true,
		WasRunning: wasRunning, Running: s.running,
		Now: s.now, LastActive: lastActive, IdleAfter: r.RolloutIdleAfter,
	}
	if in.Policy == v1alpha1.RolloutImmediate && wasRunning && s.running {
		r.inflight.decide.Lock()
		defer r.inflight.decide.Unlock()
		if in.BudgetAvailable, err = r.budgetAvailable(ctx, s); err != nil {
			return pod, false, 0, err
		}
	}
	d := DecideRollout(in)
	if !d.Apply {
		r.Metrics.rolloutDeferred()
		return pod, true, d.RequeueAfter, nil
	}
	if d.Restart {
		r.inflight.add(s.template.Key, key, s.now)
	}
	r.Metrics.rolloutApplied()
	r.Recorder.Eventf(s.ul, nil, corev1.EventTypeNormal, "RolledOut", "Rollout", "applied the current template (%s policy)", in.Policy)
	return desired, false, 0, nil
}

// budgetAvailable reports whether restarting one more of the template's
// running environments keeps the unavailable ones within maxUnavailable.
// Unavailable counts running environments whose Deployment is not available
// (from the cache) plus restarts started here that the cache may not show.
func (r *UserlandReconciler) budgetAvailable(ctx context.Context, s *reconcileState) (bool, error) {
	var siblings v1alpha1.UserlandList
	// Read-only: the cache's objects are not copied.
	if err := r.Client.List(ctx, &siblings, client.MatchingFields{IndexTemplateKey: s.template.Key}, client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("listing userlands of %s: %w", s.template.Key, err)
	}
	running, unavailable := 0, 0
	counted := map[types.NamespacedName]bool{}
	for i := range siblings.Items {
		sib := &siblings.Items[i]
		var dep appsv1.Deployment
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(sib), &dep); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, fmt.Errorf("getting deployment %s/%s: %w", sib.Namespace, sib.Name, err)
		}
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas == 0 {
			continue
		}
		running++
		if !rolledOut(&dep) {
			unavailable++
			counted[client.ObjectKeyFromObject(sib)] = true
		}
	}
	unavailable += r.inflight.count(s.template.Key, s.now, counted)
	maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(s.template.Spec.Rollout.MaxUnavailable, running, true)
	if err != nil {
		return false, fmt.Errorf("resolving maxUnavailable of %s: %w", s.template.Key, err)
	}
	maxUnavailable = max(maxUnavailable, 1)
	ctrl.LoggerFrom(ctx).V(1).Info("rollout budget", "template", s.template.Key,
		"running", running, "unavailable", unavailable, "maxUnavailable", maxUnavailable)
	return unavailable < maxUnavailable, nil
}

// reconcileStatus observes the phase; Ready is computed from it after
// the phases (summarize).
func (r *UserlandReconciler) reconcileStatus(_ context.Context, s *reconcileState) (ctrl.Result, error) {
	before := s.ul.Status.Phase
	if !s.running {
		s.ul.Status.Phase = v1alpha1.PhaseStopped
		s.ul.Status.StoppedReason = s.stopReason
		return ctrl.Result{}, nil
	}
	s.ul.Status.StoppedReason = ""
	s.health = ObserveHealth(s.dep, s.pods)
	s.ul.Status.Phase = s.health.Phase
	if before != s.health.Phase {
		switch s.health.Phase {
		case v1alpha1.PhaseReady:
			if startedAt := parseTime(s.dep.Annotations[AnnotationStartedAt]); startedAt != nil {
				r.Metrics.observeStart(s.now.Sub(*startedAt))
			}
		case v1alpha1.PhaseFailed:
			r.Recorder.Eventf(s.ul, nil, corev1.EventTypeWarning, s.health.Reason, "Start", s.health.Message)
		}
	}
	return ctrl.Result{}, nil
}

// terminalIfNamespaceTerminating stops retries in a namespace being deleted:
// nothing can be created there again, and the Userland goes with it.
func terminalIfNamespaceTerminating(err error) error {
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return reconcile.TerminalError(err)
	}
	return err
}
