package controller

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

// TestRetriesAreBoundedAndNotShared: one object failing again and again
// waits at most maxRetryDelay, and a thousand objects failing at once are
// each retried after 5 ms, not queued behind a shared rate.
func TestRetriesAreBoundedAndNotShared(t *testing.T) {
	t.Parallel()
	l := retryLimiter()
	stuck := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "stuck"}}
	var last time.Duration
	for range 40 {
		last = l.When(stuck)
	}
	if last != maxRetryDelay {
		t.Errorf("after 40 failures an object waits %s, want %s", last, maxRetryDelay)
	}
	var longest time.Duration
	for i := range 1000 {
		longest = max(longest, l.When(ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(i)}}))
	}
	if longest != 5*time.Millisecond {
		t.Errorf("a thousand objects failing once: the last retried after %s, want 5ms each", longest)
	}
	l.Forget(stuck)
	if got := l.When(stuck); got != 5*time.Millisecond {
		t.Errorf("after a success the object's next failure waits %s, want 5ms", got)
	}
}
