package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
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

// reconcileDeployment decides whether the environment runs (namespace
// access, suspend, idle) and which pod template it runs (rollout policy),
// then applies it.
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

	if s.course != nil && startedAt == nil && idleStoppedAt == nil && lastActivity == nil {
		// A course's environments are made ahead of use (a whole roster
		// at once); each starts when its student first opens it, as if
		// it had been stopped for idleness when it was made.
		created := s.ul.CreationTimestamp.Time
		idleStoppedAt = &created
	}
	s.ul.Status.QueuePosition = 0

	var result ctrl.Result
	next := map[string]string{}
	switch {
	case s.notAllowed != nil:
		// Stopped, not idle-stopped: once the namespace is allowed again
		// the environment starts at once, as it ran before.
		s.running = false
		s.ul.Status.IdleStopTime = nil
	case s.ul.Spec.Suspend:
		s.running, s.stopReason = false, v1alpha1.StoppedSuspended
		s.ul.Status.IdleStopTime = nil
	default:
		in := IdleInput{Now: s.now, LastActivity: lastActivity, IdleStoppedAt: idleStoppedAt}
		if startedAt != nil {
			in.StartedAt = *startedAt
		} else {
			in.StartedAt = s.now
		}
		if s.template.Spec.Idle != nil {
			in.Timeout = &s.template.Spec.Idle.Timeout.Duration
			in.WarnBefore = WarnBefore(s.template.Spec.Idle)
		}
		d := DecideIdle(in)
		s.running = d.Running
		result.RequeueAfter = d.RequeueAfter
		r.warnIdle(s, d.StopAt)
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
			if s.course != nil && lastActivity == nil {
				// Made by its course ahead of use, and never asked for
				// since: it has not run, so it is not idle.
				s.stopReason = v1alpha1.StoppedNotStarted
			}
		}
	}
	requeue, err := r.applyCourse(ctx, s, next, wasRunning, idleStoppedAt, lastActivity)
	if err != nil {
		return ctrl.Result{}, err
	}
	result = reconcile.LowestRequeue(result, ctrl.Result{RequeueAfter: requeue})
	if s.running {
		if wasRunning && startedAt != nil {
			next[AnnotationStartedAt] = startedAt.UTC().Format(time.RFC3339)
		} else {
			next[AnnotationStartedAt] = s.now.UTC().Format(time.RFC3339)
		}
	}

	desiredPod := PodTemplateFor(s.ul, s.template.Spec, r.Routes, s.course, s.role)
	pod, pending, requeue, err := r.choosePodTemplate(ctx, s, desiredPod, wasRunning, startedAt, lastActivity)
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
