package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/reconcile"
)

// shownCondition is what kstatus and people read of a condition.
type shownCondition struct {
	Type, Reason string
	Status       metav1.ConditionStatus
}

func shown(list []metav1.Condition) []shownCondition {
	var out []shownCondition
	for _, c := range list {
		out = append(out, shownCondition{c.Type, c.Reason, c.Status})
	}
	return out
}

var stalledBefore = []metav1.Condition{{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "Old", Message: "old"}}

// Reconciling and Stalled are read from the same findings as Ready: at
// most one of them, True, and neither once the Userland is settled.
func TestUserlandKstatusFollowsReady(t *testing.T) {
	t.Parallel()
	serving := Health{Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonReady, Message: "the environment is serving"}
	starting := Health{Phase: v1alpha1.PhaseStarting, Reason: v1alpha1.ReasonStarting, Message: "waiting"}
	pulling := Health{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonImagePullBackOff, Message: "container app: the image could not be pulled"}
	ready := func(status metav1.ConditionStatus, reason string) shownCondition {
		return shownCondition{v1alpha1.ConditionReady, reason, status}
	}
	reconciling := func(reason string) shownCondition {
		return shownCondition{v1alpha1.ConditionReconciling, reason, metav1.ConditionTrue}
	}
	stalled := func(reason string) shownCondition {
		return shownCondition{v1alpha1.ConditionStalled, reason, metav1.ConditionTrue}
	}
	tests := []struct {
		name   string
		state  reconcileState
		before []metav1.Condition
		err    error
		want   []shownCondition
	}{
		{name: "serving", state: reconcileState{running: true, health: serving},
			want: []shownCondition{ready(metav1.ConditionTrue, v1alpha1.ReasonReady)}},
		{name: "serving again: an old Stalled goes", state: reconcileState{running: true, health: serving}, before: stalledBefore,
			want: []shownCondition{ready(metav1.ConditionTrue, v1alpha1.ReasonReady)}},
		{name: "starting", state: reconcileState{running: true, health: starting},
			want: []shownCondition{ready(metav1.ConditionFalse, v1alpha1.ReasonStarting), reconciling(v1alpha1.ReasonProgressing)}},
		{name: "a pod that cannot start yet", state: reconcileState{running: true, health: pulling},
			want: []shownCondition{ready(metav1.ConditionFalse, v1alpha1.ReasonImagePullBackOff), reconciling(v1alpha1.ReasonProgressing)}},
		{name: "a failed step is retried", state: reconcileState{running: true, health: serving}, err: errors.New("boom"),
			want: []shownCondition{ready(metav1.ConditionFalse, v1alpha1.ReasonReconcileFailed), reconciling(v1alpha1.ReasonProgressingWithRetry)}},
		{name: "waiting for the template", state: reconcileState{stalled: &finding{v1alpha1.ReasonTemplateNotFound, "waiting for the template"}, waiting: true},
			want: []shownCondition{ready(metav1.ConditionFalse, v1alpha1.ReasonTemplateNotFound), reconciling(v1alpha1.ReasonProgressing)}},
		{name: "a name taken by someone else", state: reconcileState{stalled: &finding{v1alpha1.ReasonNameConflict, "taken"}},
			want: []shownCondition{ready(metav1.ConditionFalse, v1alpha1.ReasonNameConflict), stalled(v1alpha1.ReasonNameConflict)}},
		{name: "suspended, as asked", state: reconcileState{stopReason: v1alpha1.StoppedSuspended}, before: stalledBefore,
			want: []shownCondition{ready(metav1.ConditionFalse, v1alpha1.ReasonSuspended)}},
		{name: "idle", state: reconcileState{stopReason: v1alpha1.StoppedIdle},
			want: []shownCondition{ready(metav1.ConditionFalse, v1alpha1.ReasonIdle)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.state
			s.ul = &v1alpha1.Userland{Status: v1alpha1.UserlandStatus{Conditions: append([]metav1.Condition(nil), tt.before...)}}
			s.conditions = reconcile.NewConditions(&s.ul.Status.Conditions, 1, clocktesting.NewFakePassiveClock(time.Now()))
			(&UserlandReconciler{}).summarize(&s, tt.err)
			if diff := cmp.Diff(tt.want, shown(s.ul.Status.Conditions)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCourseKstatusFollowsReady(t *testing.T) {
	t.Parallel()
	resolved := []shownCondition{
		{v1alpha1.ConditionTemplatesResolved, v1alpha1.ReasonTemplatesFound, metav1.ConditionTrue},
	}
	claims := func(reason string, status metav1.ConditionStatus) shownCondition {
		return shownCondition{v1alpha1.ConditionSharedVolumesReady, reason, status}
	}
	bound := claims(v1alpha1.ReasonClaimsBound, metav1.ConditionTrue)
	tests := []struct {
		name   string
		state  courseState
		before []metav1.Condition
		err    error
		want   []shownCondition
	}{
		{name: "ready", before: stalledBefore,
			want: append(resolved, bound, shownCondition{v1alpha1.ConditionReady, v1alpha1.ReasonCourseReady, metav1.ConditionTrue})},
		{name: "a failed step is retried", err: errors.New("boom"),
			want: append(resolved, bound, shownCondition{v1alpha1.ConditionReady, v1alpha1.ReasonReconcileFailed, metav1.ConditionFalse},
				shownCondition{v1alpha1.ConditionReconciling, v1alpha1.ReasonProgressingWithRetry, metav1.ConditionTrue})},
		{name: "a claim not there yet is awaited", state: courseState{volumeProblem: &finding{v1alpha1.ReasonClaimNotFound, "wait"}},
			want: append(resolved, claims(v1alpha1.ReasonClaimNotFound, metav1.ConditionFalse),
				shownCondition{v1alpha1.ConditionReady, v1alpha1.ReasonClaimNotFound, metav1.ConditionFalse},
				shownCondition{v1alpha1.ConditionReconciling, v1alpha1.ReasonProgressing, metav1.ConditionTrue})},
		{name: "a claim of one node needs a person", state: courseState{volumeProblem: &finding{v1alpha1.ReasonClaimNotShareable, "RWO"}},
			want: append(resolved, claims(v1alpha1.ReasonClaimNotShareable, metav1.ConditionFalse),
				shownCondition{v1alpha1.ConditionReady, v1alpha1.ReasonClaimNotShareable, metav1.ConditionFalse},
				shownCondition{v1alpha1.ConditionStalled, v1alpha1.ReasonClaimNotShareable, metav1.ConditionTrue})},
		{name: "a snapshot in the way needs a person", state: courseState{snapshotMismatch: &finding{v1alpha1.ReasonSnapshotMismatch, "theirs"}},
			want: append(resolved, bound, shownCondition{v1alpha1.ConditionReady, v1alpha1.ReasonSnapshotMismatch, metav1.ConditionFalse},
				shownCondition{v1alpha1.ConditionStalled, v1alpha1.ReasonSnapshotMismatch, metav1.ConditionTrue})},
		{name: "snapshots are awaited", state: courseState{waiting: "snapshots"},
			want: append(resolved, bound, shownCondition{v1alpha1.ConditionReady, v1alpha1.ReasonSnapshotsPending, metav1.ConditionFalse},
				shownCondition{v1alpha1.ConditionReconciling, v1alpha1.ReasonProgressing, metav1.ConditionTrue})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.state
			s.c = &v1alpha1.Course{Status: v1alpha1.CourseStatus{Conditions: append([]metav1.Condition(nil), tt.before...)}}
			s.conditions = reconcile.NewConditions(&s.c.Status.Conditions, 1, clocktesting.NewFakePassiveClock(time.Now()))
			(&CourseReconciler{}).summarizeCourse(&s, tt.err)
			if diff := cmp.Diff(tt.want, shown(s.c.Status.Conditions)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}
