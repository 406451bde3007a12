package controller

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/describe"
	"github.com/userland-dev/userland/internal/reconcile"
)

// maxFailureMessage bounds the error text a Ready condition carries, as it
// bounds every condition's message.
const maxFailureMessage = reconcile.MaxMessage

// summarize sets Ready, Reconciling or Stalled, and UpToDate once per
// reconcile, from what the phases found and the error that ended them (nil
// on success), so no phase can leave Ready True while a later one failed.
func (r *UserlandReconciler) summarize(s *reconcileState, err error) {
	status, reason, message := readiness(s, err)
	s.conditions.Set(v1alpha1.ConditionReady, status, reason, message)
	// kstatus's conditions follow Ready's findings, with Ready's message,
	// so they change only when Ready does and cost no write of their own.
	switch {
	case err != nil:
		s.conditions.Reconciling(v1alpha1.ReasonProgressingWithRetry, message)
	case s.stalled != nil && !s.waiting:
		s.conditions.Stalled(reason, message)
	case s.stalled != nil, s.running && s.health.Phase != v1alpha1.PhaseReady:
		// Waiting for the template; starting, or a pod the kubelet keeps
		// trying to start.
		s.conditions.Reconciling(v1alpha1.ReasonProgressing, message)
	default:
		// Serving, or stopped as it should be.
		s.conditions.Settled()
	}
	if !s.rolloutDecided {
		return
	}
	if s.ul.Status.UpdatePending {
		s.conditions.False(v1alpha1.ConditionUpToDate, v1alpha1.ReasonRolloutDeferred,
			fmt.Sprintf("a template change waits for the %s rollout policy", s.template.Spec.Rollout.Policy))
	} else {
		s.conditions.True(v1alpha1.ConditionUpToDate, v1alpha1.ReasonRolledOut, "the environment runs the current template")
	}
}

// readiness is the Ready condition for what the phases found, in order of
// precedence: a failed step, a spec problem, a stopped environment, then
// the health of a running one.
func readiness(s *reconcileState, err error) (metav1.ConditionStatus, string, string) {
	switch {
	case err != nil:
		return metav1.ConditionFalse, v1alpha1.ReasonReconcileFailed, reconcile.Truncate(err.Error())
	case s.stalled != nil:
		return metav1.ConditionFalse, s.stalled.reason, s.stalled.message
	case !s.running && s.stopReason == v1alpha1.StoppedIdle:
		return metav1.ConditionFalse, v1alpha1.ReasonIdle, "stopped after no activity; the next request wakes it"
	case !s.running && s.stopReason == v1alpha1.StoppedNotStarted:
		return metav1.ConditionFalse, v1alpha1.ReasonNotStarted, "not started yet; it starts when its user first opens it"
	case !s.running && s.stopReason == v1alpha1.StoppedBudgetExhausted:
		return metav1.ConditionFalse, v1alpha1.ReasonBudgetExhausted, describe.BudgetStop(s.ul.Status.Usage)
	case !s.running && s.course != nil && s.stopReason != v1alpha1.StoppedSuspended:
		return metav1.ConditionFalse, string(s.stopReason), courseStopMessage(s)
	case !s.running:
		return metav1.ConditionFalse, v1alpha1.ReasonSuspended, "suspended (spec.suspend is true)"
	case s.health.Phase == v1alpha1.PhaseReady:
		return metav1.ConditionTrue, s.health.Reason, s.health.Message
	default:
		return metav1.ConditionFalse, s.health.Reason, s.health.Message
	}
}

// courseStopMessage says in plain words why a course keeps an environment
// stopped (describe.CourseStop).
func courseStopMessage(s *reconcileState) string {
	return describe.CourseStop(s.course, s.stopReason, s.ul.Status.QueuePosition, s.ul.Spec.User)
}
