package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// Ready is one pure function of what the phases found; the precedence is
// what makes it truthful (a failed step outranks everything it would
// otherwise have reported).
func TestReadinessPrecedence(t *testing.T) {
	t.Parallel()
	serving := Health{Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonReady, Message: "the environment is serving"}
	pulling := Health{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonImagePullBackOff, Message: "container app: the image could not be pulled"}
	type ready struct {
		Status  metav1.ConditionStatus
		Reason  string
		Message string
	}
	tests := []struct {
		name  string
		state reconcileState
		err   error
		want  ready
	}{
		{"serving", reconcileState{running: true, health: serving},
			nil, ready{metav1.ConditionTrue, v1alpha1.ReasonReady, "the environment is serving"}},
		{"a failed step outranks a serving pod", reconcileState{running: true, health: serving},
			fmt.Errorf("applying Deployment ns/u: %w", errors.New("admission webhook denied the request")),
			ready{metav1.ConditionFalse, v1alpha1.ReasonReconcileFailed, "applying Deployment ns/u: admission webhook denied the request"}},
		{"a failed step outranks a spec problem", reconcileState{stalled: &finding{v1alpha1.ReasonNameConflict, "taken"}},
			errors.New("boom"), ready{metav1.ConditionFalse, v1alpha1.ReasonReconcileFailed, "boom"}},
		{"a spec problem outranks a stop", reconcileState{stalled: &finding{v1alpha1.ReasonVolumeConflict, "claim home belongs to another user"}, stopReason: v1alpha1.StoppedSuspended},
			nil, ready{metav1.ConditionFalse, v1alpha1.ReasonVolumeConflict, "claim home belongs to another user"}},
		{"suspended", reconcileState{stopReason: v1alpha1.StoppedSuspended},
			nil, ready{metav1.ConditionFalse, v1alpha1.ReasonSuspended, "suspended (spec.suspend is true)"}},
		{"idle", reconcileState{stopReason: v1alpha1.StoppedIdle},
			nil, ready{metav1.ConditionFalse, v1alpha1.ReasonIdle, "stopped after no activity; the next request wakes it"}},
		{"made by a course, never opened", reconcileState{stopReason: v1alpha1.StoppedNotStarted, course: &v1alpha1.Course{}},
			nil, ready{metav1.ConditionFalse, v1alpha1.ReasonNotStarted, "not started yet; it starts when its user first opens it"}},
		{"cannot start", reconcileState{running: true, health: pulling},
			nil, ready{metav1.ConditionFalse, v1alpha1.ReasonImagePullBackOff, "container app: the image could not be pulled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, reason, message := readiness(&tt.state, tt.err)
			if diff := cmp.Diff(tt.want, ready{status, reason, message}); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
		})
	}
	long := errors.New(strings.Repeat("x", 5000))
	if _, _, message := readiness(&reconcileState{}, long); len(message) > maxFailureMessage+len("…") {
		t.Errorf("a %d-byte error became a %d-byte condition message", len(long.Error()), len(message))
	}
}
