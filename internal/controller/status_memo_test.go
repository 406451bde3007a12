package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

func TestStatusMemoSkipsOnlyARepeatTheCacheHasNotSeen(t *testing.T) {
	at := func(sec int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 1, 0, 0, sec, 0, time.UTC)) }
	starting := func(transition metav1.Time) v1alpha1.UserlandStatus {
		return v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseStarting, Conditions: []metav1.Condition{{
			Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Starting", LastTransitionTime: transition,
		}}}
	}
	ready := v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseReady, Conditions: []metav1.Condition{{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: at(5),
	}}}
	userland := func(name, rv string) *v1alpha1.Userland {
		ul := &v1alpha1.Userland{}
		ul.Namespace, ul.Name, ul.ResourceVersion = "ns", name, rv
		return ul
	}

	tests := []struct {
		name      string
		remember  bool // whether "u" at resourceVersion 10 was patched to starting(at(1))
		forget    bool
		cached    *v1alpha1.Userland
		status    v1alpha1.UserlandStatus
		wantSkips []bool // alreadyWritten, asked twice
	}{
		{name: "nothing written", cached: userland("u", "10"), status: starting(at(1)), wantSkips: []bool{false, false}},
		{name: "same write over the same stale version", remember: true, cached: userland("u", "10"), status: starting(at(1)), wantSkips: []bool{true, true}},
		{name: "only the transition time differs", remember: true, cached: userland("u", "10"), status: starting(at(2)), wantSkips: []bool{true, true}},
		{name: "a different status", remember: true, cached: userland("u", "10"), status: ready, wantSkips: []bool{false, false}},
		// The cache moved on (our write arrived, or someone else wrote):
		// the memo is dropped and the write decided from the cache alone.
		{name: "cache moved past the write", remember: true, cached: userland("u", "11"), status: starting(at(1)), wantSkips: []bool{false, false}},
		{name: "another Userland", remember: true, cached: userland("v", "10"), status: starting(at(1)), wantSkips: []bool{false, false}},
		{name: "forgotten when deleted", remember: true, forget: true, cached: userland("u", "10"), status: starting(at(1)), wantSkips: []bool{false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m statusMemo
			if tt.remember {
				s := starting(at(1))
				m.wrote(userland("u", "10"), &s)
			}
			if tt.forget {
				m.forget(client.ObjectKeyFromObject(userland("u", "")))
			}
			var got []bool
			for range tt.wantSkips {
				got = append(got, m.alreadyWritten(tt.cached, &tt.status))
			}
			if diff := cmp.Diff(tt.wantSkips, got); diff != "" {
				t.Errorf("alreadyWritten (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusMemoForgetsWhatTheCacheCaughtUpWith(t *testing.T) {
	var m statusMemo
	ul := &v1alpha1.Userland{}
	ul.Namespace, ul.Name, ul.ResourceVersion = "ns", "u", "10"
	s := v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseReady}
	m.wrote(ul, &s)
	if m.needsPatch(ul, &s) {
		t.Errorf("needsPatch = true for a repeat of a write still in flight")
	}
	// The write arrives: the cache holds it at a newer version, and the
	// next reconcile computes the same status, so nothing is patched and
	// the entry must still go, or the memo keeps one per Userland forever.
	ul.ResourceVersion, ul.Status = "11", s
	if m.needsPatch(ul, &s) {
		t.Errorf("needsPatch = true for a status the cache already holds")
	}
	if len(m.written) != 0 {
		t.Errorf("memo holds %d entries after the cache caught up, want 0", len(m.written))
	}
	if changed := (v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseStopped}); !m.needsPatch(ul, &changed) {
		t.Errorf("needsPatch = false for a changed status with nothing in flight")
	}
}
