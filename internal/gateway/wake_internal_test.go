package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// TestShouldWakeWritesOnceAWindow: the burst of requests a stopped
// environment gets writes one wake per window, on the injected clock; a
// forgotten wake (the environment served) or a passed window writes again,
// and old entries of other environments are dropped.
func TestShouldWakeWritesOnceAWindow(t *testing.T) {
	const window = time.Minute
	start := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	steps := []struct {
		name   string
		after  time.Duration // since start
		key    types.NamespacedName
		forget bool
		want   bool
	}{
		{name: "first request wakes", key: a, want: true},
		{name: "the burst does not", after: 2 * time.Second, key: a, want: false},
		{name: "another environment does", after: 3 * time.Second, key: b, want: true},
		{name: "just before the window ends, still not", after: window - time.Second, key: a, want: false},
		{name: "once the window has passed, again", after: window, key: a, want: true},
		{name: "forgotten: at once again", after: window + time.Second, key: a, forget: true, want: true},
	}
	clock := testingclock.NewFakePassiveClock(start)
	s := &Server{Clock: clock}
	var got, want []bool
	for _, st := range steps {
		clock.SetTime(start.Add(st.after))
		if st.forget {
			s.forgetWake(st.key)
		}
		got, want = append(got, s.shouldWake(st.key, window)), append(want, st.want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("wakes written per step %v (-want +got):\n%s", steps, diff)
	}
	// A wake of a third environment, when b's is a window old, drops b's.
	clock.SetTime(start.Add(3*time.Second + window))
	if !s.shouldWake(types.NamespacedName{Namespace: "ns", Name: "c"}, window) {
		t.Error("a third environment's first request did not wake it")
	}
	if _, kept := s.waking[b]; kept {
		t.Errorf("b's wake, a window old, is still remembered: %v", s.waking)
	}
}

// TestAwaitReadyEndsForAnotherUserlandOfTheName: a request authorised for
// alice's "lab" waits while lab is deleted and created again for bob;
// bob's Ready lab ends the wait with nothing, never as alice's.
func TestAwaitReadyEndsForAnotherUserlandOfTheName(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	bobs := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lab", UID: "uid-bob"},
		Status: v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseReady}}
	s := &Server{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(bobs).Build()}
	key := types.NamespacedName{Namespace: "ns", Name: "lab"}
	type result struct {
		Found, Ready bool
	}
	got := map[types.UID]result{}
	for _, uid := range []types.UID{"uid-alice", "uid-bob"} {
		for _, stopOnFailed := range []bool{false, true} {
			cur, ready := s.awaitReady(context.Background(), key, uid, 300*time.Millisecond, stopOnFailed)
			if cur != nil && cur.UID != uid {
				t.Errorf("waiting for %s returned %s's Userland", uid, cur.UID)
			}
			got[uid] = result{Found: cur != nil, Ready: ready}
		}
	}
	want := map[types.UID]result{"uid-alice": {}, "uid-bob": {Found: true, Ready: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
