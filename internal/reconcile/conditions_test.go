package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/userland-dev/userland/api/v1alpha1"
)

func TestTheKstatusTypesAreTheAPIs(t *testing.T) {
	t.Parallel()
	if diff := cmp.Diff([]string{v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled}, []string{TypeReconciling, TypeStalled}); diff != "" {
		t.Errorf("condition types (-want +got):\n%s", diff)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", MaxMessage+10)
	// "é" is two bytes: placed so that byte MaxMessage is its second.
	split := strings.Repeat("x", MaxMessage-1) + "é" + "tail"
	tests := []struct {
		name, message, want string
	}{
		{"short", "boom", "boom"},
		{"exactly the bound", long[:MaxMessage], long[:MaxMessage]},
		{"over the bound", long, long[:MaxMessage] + "…"},
		{"a character across the bound is left out whole", split, split[:MaxMessage-1] + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Truncate(tt.message)); diff != "" {
				t.Errorf("Truncate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConditionsSet(t *testing.T) {
	t.Parallel()
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	ready := func(status metav1.ConditionStatus, reason string, generation int64, at metav1.Time) metav1.Condition {
		return metav1.Condition{Type: "Ready", Status: status, Reason: reason, Message: "m", ObservedGeneration: generation, LastTransitionTime: at}
	}
	tests := []struct {
		name   string
		before []metav1.Condition
		set    func(Conditions)
		want   []metav1.Condition
	}{
		{"a new condition is stamped now", nil,
			func(c Conditions) { c.True("Ready", "Up", "m") },
			[]metav1.Condition{ready(metav1.ConditionTrue, "Up", 2, metav1.NewTime(now))}},
		{"the same status keeps its transition time and takes the generation",
			[]metav1.Condition{ready(metav1.ConditionFalse, "Starting", 1, then)},
			func(c Conditions) { c.False("Ready", "Failed", "m") },
			[]metav1.Condition{ready(metav1.ConditionFalse, "Failed", 2, then)}},
		{"a new status is a transition",
			[]metav1.Condition{ready(metav1.ConditionFalse, "Starting", 2, then)},
			func(c Conditions) { c.Set("Ready", metav1.ConditionTrue, "Up", "m") },
			[]metav1.Condition{ready(metav1.ConditionTrue, "Up", 2, metav1.NewTime(now))}},
		{"a long message is truncated", nil,
			func(c Conditions) { c.False("Ready", "Failed", strings.Repeat("x", 2*MaxMessage)) },
			[]metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Failed", Message: strings.Repeat("x", MaxMessage) + "…",
				ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(now)}}},
		{"remove", []metav1.Condition{ready(metav1.ConditionTrue, "Up", 1, then)},
			func(c Conditions) { c.Remove("Ready") },
			[]metav1.Condition{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list := append([]metav1.Condition(nil), tt.before...)
			tt.set(NewConditions(&list, 2, clocktesting.NewFakePassiveClock(now)))
			if diff := cmp.Diff(tt.want, list); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

// kstatus's conditions are abnormal-true: True while they apply, absent
// otherwise, and never both.
func TestConditionsKstatus(t *testing.T) {
	t.Parallel()
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Starting", ObservedGeneration: 3, LastTransitionTime: then}
	reconciling := func(reason string, at metav1.Time) metav1.Condition {
		return metav1.Condition{Type: TypeReconciling, Status: metav1.ConditionTrue, Reason: reason, Message: "m", ObservedGeneration: 3, LastTransitionTime: at}
	}
	stalled := func(reason string, at metav1.Time) metav1.Condition {
		return metav1.Condition{Type: TypeStalled, Status: metav1.ConditionTrue, Reason: reason, Message: "m", ObservedGeneration: 3, LastTransitionTime: at}
	}
	tests := []struct {
		name   string
		before []metav1.Condition
		set    func(Conditions)
		want   []metav1.Condition
	}{
		{"reconciling from nothing", []metav1.Condition{ready},
			func(c Conditions) { c.Reconciling("Progressing", "m") },
			[]metav1.Condition{ready, reconciling("Progressing", metav1.NewTime(now))}},
		{"still reconciling keeps its time", []metav1.Condition{ready, reconciling("Progressing", then)},
			func(c Conditions) { c.Reconciling("ProgressingWithRetry", "m") },
			[]metav1.Condition{ready, reconciling("ProgressingWithRetry", then)}},
		{"stalled replaces reconciling", []metav1.Condition{ready, reconciling("Progressing", then)},
			func(c Conditions) { c.Stalled("NameConflict", "m") },
			[]metav1.Condition{ready, stalled("NameConflict", metav1.NewTime(now))}},
		{"reconciling replaces stalled", []metav1.Condition{stalled("NameConflict", then), ready},
			func(c Conditions) { c.Reconciling("Progressing", "m") },
			[]metav1.Condition{ready, reconciling("Progressing", metav1.NewTime(now))}},
		{"settled removes both", []metav1.Condition{reconciling("Progressing", then), ready, stalled("NameConflict", then)},
			func(c Conditions) { c.Settled() },
			[]metav1.Condition{ready}},
		{"settled with neither changes nothing", []metav1.Condition{ready},
			func(c Conditions) { c.Settled() },
			[]metav1.Condition{ready}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list := append([]metav1.Condition(nil), tt.before...)
			tt.set(NewConditions(&list, 3, clocktesting.NewFakePassiveClock(now)))
			if diff := cmp.Diff(tt.want, list); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}
