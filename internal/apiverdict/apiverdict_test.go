package apiverdict

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// verdicts is what each class says of one error.
type verdicts struct {
	NamespaceTerminating, Refused, Unreachable, Uncertain bool
}

func TestEachAnswerFallsInItsClasses(t *testing.T) {
	t.Parallel()
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	terminating := apierrors.NewForbidden(gr, "x", errors.New("unable to create new content in namespace n because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace n is being terminated"}}
	// The same cause on another status: not the admission plugin's answer.
	conflictWithCause := apierrors.NewConflict(gr, "x", errors.New("conflict"))
	conflictWithCause.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	tests := []struct {
		name string
		err  error
		want verdicts
	}{
		{"the namespace is being deleted", terminating, verdicts{NamespaceTerminating: true, Refused: true}},
		{"the namespace is being deleted, wrapped", fmt.Errorf("creating service n/x: %w", terminating), verdicts{NamespaceTerminating: true, Refused: true}},
		{"the cause on a conflict", conflictWithCause, verdicts{Refused: true}},
		{"invalid", fmt.Errorf("applying: %w", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "x", nil)), verdicts{Refused: true}},
		{"forbidden by RBAC or an admission policy", apierrors.NewForbidden(gr, "x", errors.New("denied")), verdicts{Refused: true}},
		{"not found", apierrors.NewNotFound(gr, "x"), verdicts{Refused: true}},
		{"a server timeout", apierrors.NewServerTimeout(gr, "patch", 1), verdicts{Unreachable: true, Uncertain: true}},
		{"a request timeout", apierrors.NewTimeoutError("slow", 1), verdicts{Unreachable: true, Uncertain: true}},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), verdicts{Unreachable: true}},
		{"unavailable", apierrors.NewServiceUnavailable("down"), verdicts{Unreachable: true}},
		{"an internal error", apierrors.NewInternalError(errors.New("etcd")), verdicts{}},
		// client-go returns the HTTP client's errors as *url.Error.
		{"the API server down: a refused connection", &url.Error{Op: "Post", URL: "https://api/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, verdicts{Unreachable: true}},
		{"a connection lost mid-request", &url.Error{Op: "Post", URL: "https://api/x", Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}, verdicts{Unreachable: true, Uncertain: true}},
		{"the client's deadline passed", &url.Error{Op: "Post", URL: "https://api/x", Err: context.DeadlineExceeded}, verdicts{Unreachable: true, Uncertain: true}},
		{"the caller gave up mid-request", &url.Error{Op: "Post", URL: "https://api/x", Err: context.Canceled}, verdicts{Unreachable: true, Uncertain: true}},
		{"a bare deadline", context.DeadlineExceeded, verdicts{Unreachable: true, Uncertain: true}},
		{"a plain error", errors.New("connection reset by peer"), verdicts{}},
		{"a bare cancellation", context.Canceled, verdicts{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := verdicts{NamespaceTerminating(tt.err), Refused(tt.err), Unreachable(tt.err), Uncertain(tt.err)}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}
