package reconcile

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func TestFirstStatusHold(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	key := types.NamespacedName{Namespace: "cs101", Name: "u"}
	type step struct {
		at                       time.Duration
		neverWritten, inProgress bool
	}
	cases := []struct {
		name   string
		window time.Duration
		steps  []step
		want   []string // per step: "hold <wait>" or "write"
	}{
		{"settles within the window: one write", time.Second,
			[]step{{0, true, true}, {300 * time.Millisecond, true, true}, {700 * time.Millisecond, true, false}},
			[]string{"hold 1s", "hold 700ms", "write"}},
		{"still starting after the window: written then", time.Second,
			[]step{{0, true, true}, {time.Second, true, true}},
			[]string{"hold 1s", "write"}},
		{"a failed write does not start another window", time.Second,
			[]step{{0, true, true}, {1500 * time.Millisecond, true, true}, {2 * time.Second, true, true}},
			[]string{"hold 1s", "write", "write"}},
		{"once written, never held", time.Second,
			[]step{{0, false, true}},
			[]string{"write"}},
		{"a settled first status is not held", time.Second,
			[]step{{0, true, false}},
			[]string{"write"}},
		{"a new window after the status was written and reset", time.Second,
			[]step{{0, true, true}, {2 * time.Second, true, true}, {3 * time.Second, false, true}, {4 * time.Second, true, true}},
			[]string{"hold 1s", "write", "write", "hold 1s"}},
		{"window zero disables", 0,
			[]step{{0, true, true}},
			[]string{"write"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &FirstStatusHold{Window: tc.window}
			var got []string
			for _, s := range tc.steps {
				wait, hold := h.Hold(key, t0.Add(s.at), s.neverWritten, s.inProgress)
				if hold {
					got = append(got, fmt.Sprintf("hold %v", wait))
				} else {
					got = append(got, "write")
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	var nilHold *FirstStatusHold
	if _, hold := nilHold.Hold(key, t0, true, true); hold {
		t.Error("a nil hold held")
	}
	h := &FirstStatusHold{Window: time.Second}
	h.Hold(key, t0, true, true)
	h.Forget(key)
	if wait, _ := h.Hold(key, t0.Add(900*time.Millisecond), true, true); wait != time.Second {
		t.Errorf("after Forget the window restarts: wait %v, want 1s", wait)
	}
}
