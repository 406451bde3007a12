package controller

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/apiverdict"
	"github.com/userland-dev/userland/internal/reconcile"
)

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

// reconcileDeployment asks decideRun whether the environment runs, then
// chooses the pod template it runs (rollout policy) and applies it.
func (r *UserlandReconciler) reconcileDeployment(ctx context.Context, s *reconcileState) (ctrl.Result, error) {
	desiredPod := PodTemplateFor(s.ul, s.template.Spec, r.Routes, s.course, s.role, BindsIncarnation(s.ul, s.dep))
	if bindOnReplace(s.ul, s.dep, desiredPod) {
		desiredPod = PodTemplateFor(s.ul, s.template.Spec, r.Routes, s.course, s.role, true)
	}
	sharers, err := r.budgetSharers(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	d, err := decideRun(RunInput{
		Now: s.now, Userland: s.ul, Idle: s.template.Spec.Idle,
		Course: s.course, Role: s.role, NotAllowed: s.notAllowed != nil,
		Deployment: s.dep,
		Admit: func(maxRunning int, since time.Time) (int, error) {
			return r.admit(ctx, s, maxRunning, since)
		},
		Budget:     budgetOf(s.ul, s.template.Spec, s.course, s.role, &desiredPod.Spec, s.now),
		SharedWith: sharers,
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	s.running, s.stopReason = d.Running, d.StopReason
	s.ul.Status.QueuePosition = d.QueuePosition
	r.warnIdle(s, d.WarnStopAt)
	if d.IdleStopped {
		r.Recorder.Eventf(s.ul, nil, corev1.EventTypeNormal, "IdleStopped", "Stop",
			"stopped after %s without activity", s.template.Spec.Idle.Timeout.Duration)
		r.Metrics.idleStop()
	}
	r.recordUsage(s, d)
	if d.Woken {
		r.Recorder.Eventf(s.ul, nil, corev1.EventTypeNormal, "Woken", "Start", "started by activity after an idle stop")
	}
	result := ctrl.Result{RequeueAfter: d.RequeueAfter}
	wasRunning := d.WasRunning

	key := client.ObjectKeyFromObject(s.ul)
	inflightBefore, hadInflight := r.inflight.get(key)
	pod, pending, requeue, err := r.choosePodTemplate(ctx, s, desiredPod, wasRunning, d.LastActive)
	if err != nil {
		return ctrl.Result{}, err
	}
	result = reconcile.LowestRequeue(result, ctrl.Result{RequeueAfter: requeue})
	s.ul.Status.UpdatePending, s.rolloutDecided = pending, true

	if pending {
		// Deferral happens only while the environment keeps running, so
		// the Deployment needs no change at all until the rollout is due.
		return result, nil
	}
	if s.dep == nil || s.dep.Spec.Template.Annotations[AnnotationTemplateHash] != pod.Annotations[AnnotationTemplateHash] {
		// A pod template the cache does not show is written, by any path.
		// (One it shows already is no write: a revert within the cache's
		// lag leaves the restart written since in flight.)
		r.inflight.applying(key, pod.Annotations[AnnotationTemplateHash])
	}
	replicas := int32(0)
	if s.running {
		replicas = 1
	}
	desired := Deployment(s.ul, pod, replicas, d.Annotations)
	var cached client.Object
	if s.dep != nil {
		cached = s.dep
	}
	wrote, err := r.applyWrote(ctx, s, desired, cached)
	r.settleInflight(s, key, inflightBefore, hadInflight, wrote && !apiverdict.Refused(err))
	if err != nil {
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

// bindOnReplace says whether an environment that is not bound to its
// Userland's UID (BindsIncarnation: an earlier version's Deployment, or
// one edited by hand) is bound now, because its pod is being replaced
// anyway: no pod runs (stopped; a start makes a new one), its template
// changed (desired, unbound, differs from what runs; the rollout policy
// still decides when it is applied), or a restart was asked for. A
// running, unchanged environment is left alone: binding it would restart
// it. The Service selects by the UID from the reconcile after the cache
// shows the bound Deployment; until then it selects by name, which the
// new pod carries too.
func bindOnReplace(ul *v1alpha1.Userland, dep *appsv1.Deployment, desired corev1.PodTemplateSpec) bool {
	if BindsIncarnation(ul, dep) {
		return false
	}
	running := dep.Spec.Replicas == nil || *dep.Spec.Replicas > 0
	current := dep.Spec.Template.Annotations
	return !running || current[AnnotationTemplateHash] != desired.Annotations[AnnotationTemplateHash] ||
		current[v1alpha1.AnnotationRestartedAt] != desired.Annotations[v1alpha1.AnnotationRestartedAt]
}

// warnIdle publishes an idle stop that is near (status.idleStopTime, read
// by the dashboard) with one event when the warning starts, and clears it
// once activity moved the stop away.
func (r *UserlandReconciler) warnIdle(s *reconcileState, stopAt *time.Time) {
	if stopAt == nil {
		s.ul.Status.IdleStopTime = nil
		return
	}
	if s.ul.Status.IdleStopTime == nil || !s.ul.Status.IdleStopTime.Time.Equal(stopAt.Truncate(time.Second)) {
		r.Recorder.Eventf(s.ul, nil, corev1.EventTypeNormal, "IdleStopSoon", "Stop",
			"stops at %s unless used (no activity for %s)", stopAt.UTC().Format(time.RFC3339),
			s.template.Spec.Idle.Timeout.Duration-stopAt.Sub(s.now))
	}
	s.ul.Status.IdleStopTime = &metav1.Time{Time: stopAt.Truncate(time.Second)} // as stored
}

// choosePodTemplate applies the rollout policy: the new pod template, or
// pending when the change is deferred and the Deployment is left as it is.
func (r *UserlandReconciler) choosePodTemplate(ctx context.Context, s *reconcileState, desired corev1.PodTemplateSpec,
	wasRunning bool, lastActive time.Time) (pod corev1.PodTemplateSpec, pending bool, requeue time.Duration, err error) {
	if s.dep == nil {
		return desired, false, 0, nil
	}
	current := s.dep.Spec.Template.Annotations[AnnotationTemplateHash]
	outdated := current != desired.Annotations[AnnotationTemplateHash]
	key := types.NamespacedName{Namespace: s.ul.Namespace, Name: s.ul.Name}
	if !outdated {
		if rolledOut(s.dep) {
			s.restartSeenDone = current
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
	in := RolloutInput{
		Policy: s.template.Spec.Rollout.Policy, Outdated: true,
		WasRunning: wasRunning, Running: s.running,
		Now: s.now, LastActive: lastActive, IdleAfter: r.RolloutIdleAfter,
	}
	var budgetRecheck time.Duration
	if in.Policy == v1alpha1.RolloutImmediate && wasRunning && s.running {
		r.inflight.decide.Lock()
		defer r.inflight.decide.Unlock()
		if in.BudgetAvailable, budgetRecheck, err = r.budgetAvailable(ctx, s); err != nil {
			return pod, false, 0, err
		}
	}
	d := DecideRollout(in)
	if !d.Apply {
		r.Metrics.rolloutDeferred()
		// A restart in flight that expires frees its place with no
		// Deployment event to say so: look again then.
		return pod, true, reconcile.LowestRequeue(ctrl.Result{RequeueAfter: d.RequeueAfter}, ctrl.Result{RequeueAfter: budgetRecheck}).RequeueAfter, nil
	}
	if d.Restart {
		r.inflight.add(key, s.now, desired.Annotations[AnnotationTemplateHash])
	}
	r.Metrics.rolloutApplied()
	r.Recorder.Eventf(s.ul, nil, corev1.EventTypeNormal, "RolledOut", "Rollout", "applied the current template (%s policy)", in.Policy)
	return desired, false, 0, nil
}

// settleInflight ends what this reconcile did to key's restart in flight.
// Not written (refused, or nothing to send), a restart recorded for it is
// not in flight and must not hold a place, so the tracker is put back as
// it was. A restart the cache shows finished is forgotten only after
// that: forgotten before, the put-back brought it back (and woke every
// waiting sibling) on each reconcile of a finished restart, so it was
// tracked until it expired.
func (r *UserlandReconciler) settleInflight(s *reconcileState, key types.NamespacedName, before restart, had, written bool) {
	if !written {
		r.restoreInflight(s, key, before, had)
	}
	if s.restartSeenDone != "" {
		r.inflight.done(key, s.restartSeenDone)
	}
}

// restoreInflight puts key's restart in flight back as it was before this
// reconcile; if that frees a place, the template's environments waiting
// for one are woken, as no Deployment event will come to say so.
func (r *UserlandReconciler) restoreInflight(s *reconcileState, key types.NamespacedName, before restart, had bool) {
	if !r.inflight.restore(key, before, had) {
		return
	}
	select {
	case r.budgetFreed <- event.GenericEvent{Object: s.ul.DeepCopy()}:
	default:
		// Full (a burst of refusals): the waiting ones look again when
		// the restart would have expired.
	}
}
