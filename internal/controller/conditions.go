package controller

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// maxFailureMessage bounds the error text a Ready condition carries.
const maxFailureMessage = 1024

// summarize sets Ready and UpToDate once per reconcile, from what the
// phases found and the error that ended them (nil on success), so no phase
// can leave Ready True while a later one failed.
func (r *UserlandReconciler) summarize(s *reconcileState, err error) {
	status, reason, message := readiness(s, err)
	r.setCondition(s, v1alpha1.ConditionReady, status, reason, message)
	if !s.rolloutDecided {
		return
	}
	if s.ul.Status.UpdatePending {
		r.setCondition(s, v1alpha1.ConditionUpToDate, metav1.ConditionFalse, v1alpha1.ReasonRolloutDeferred,
			fmt.Sprintf("a template change waits for the %s rollout policy", s.template.Spec.Rollout.Policy))
	} else {
		r.setCondition(s, v1alpha1.ConditionUpToDate, metav1.ConditionTrue, v1alpha1.ReasonRolledOut, "the environment runs the current template")
	}
}

// readiness is the Ready condition for what the phases found, in order of
// precedence: a failed step, a spec problem, a stopped environment, then
// the health of a running one.
func readiness(s *reconcileState, err error) (metav1.ConditionStatus, string, string) {
	switch {
	case err != nil:
		message := err.Error()
		if len(message) > maxFailureMessage {
			message = message[:maxFailureMessage] + "…"
		}
		return metav1.ConditionFalse, v1alpha1.ReasonReconcileFailed, message
	case s.stalled != nil:
		return metav1.ConditionFalse, s.stalled.reason, s.stalled.message
	case !s.running && s.stopReason == v1alpha1.StoppedIdle:
		return metav1.ConditionFalse, v1alpha1.ReasonIdle, "stopped after no activity; the next request wakes it"
	case !s.running:
		return metav1.ConditionFalse, v1alpha1.ReasonSuspended, "suspended (spec.suspend is true)"
	case s.health.Phase == v1alpha1.PhaseReady:
		return metav1.ConditionTrue, s.health.Reason, s.health.Message
	default:
		return metav1.ConditionFalse, s.health.Reason, s.health.Message
	}
}
