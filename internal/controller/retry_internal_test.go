package controller

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
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

// TestANamespaceBeingDeletedStopsRetries: the API server's refusal to
// create in a namespace being deleted (NamespaceLifecycle admission's
// error, wrapped as the phases wrap it) is terminal, so an environment
// there is not retried until its namespace is gone; anything else is
// returned as it was and retried.
func TestANamespaceBeingDeletedStopsRetries(t *testing.T) {
	t.Parallel()
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	terminating := apierrors.NewForbidden(gr, "a", errors.New("unable to create new content in namespace demo because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace demo is being terminated", Field: "metadata.namespace"}}
	tests := []struct {
		name     string
		err      error
		terminal bool
	}{
		{"namespace being deleted", fmt.Errorf("creating deployment demo/a: %w", terminating), true},
		{"forbidden for another reason", apierrors.NewForbidden(gr, "a", errors.New("quota")), false},
		{"a conflict", apierrors.NewConflict(gr, "a", errors.New("modified")), false},
		{"a lost connection", errors.New("connection reset by peer"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := terminalIfNamespaceTerminating(tt.err)
			if diff := cmp.Diff(tt.terminal, errors.Is(got, crreconcile.TerminalError(nil))); diff != "" {
				t.Errorf("terminal (-want +got):\n%s", diff)
			}
			if !errors.Is(got, tt.err) {
				t.Errorf("the error %v lost %v", got, tt.err)
			}
		})
	}
}
