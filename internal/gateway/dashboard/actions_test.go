package dashboard

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/userland-dev/userland/internal/actions"
)

func TestPlainErrorSaysWhatToDo(t *testing.T) {
	refused := &url.Error{Op: "Patch", URL: "https://10.96.0.1/apis/userland.dev/v1alpha1/namespaces/demo/userlands/a",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}}
	gr := schema.GroupResource{Group: "userland.dev", Resource: "userlands"}
	// As the API server's NamespaceLifecycle admission refuses a create
	// (internal/gateway's TestSignInProvisionsPastANamespaceBeingDeleted
	// checks a real one is recognised).
	terminating := apierrors.NewForbidden(gr, "a", errors.New("unable to create new content in namespace demo because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Field: "demo"}}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"not the user's", fmt.Errorf("stop: %w", errForbidden), "That environment does not exist or is not yours."},
		{"its name now holds another's", fmt.Errorf("stop demo/lab: %w", apierrors.NewInvalid(schema.GroupKind{Group: "userland.dev", Kind: "Userland"}, "lab",
			field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "bobs-uid", "field is immutable")})), "That environment does not exist or is not yours."},
		{"suspended by staff", actions.ErrSuspendedByStaff, "An administrator or instructor suspended this environment, so only they can start it again."},
		{"API server down", fmt.Errorf("patching demo/a: %w", refused), "The cluster could not be reached, so nothing was changed. Try again in a minute."},
		{"API server overloaded", apierrors.NewTooManyRequests("slow down", 1), "The cluster could not be reached, so nothing was changed. Try again in a minute."},
		{"API server too slow: it may have done it", fmt.Errorf("patching demo/a: %w", apierrors.NewServerTimeout(gr, "patch", 1)), "The cluster could not be reached in time, so the change may or may not have been made. Reload the page in a minute to see."},
		{"connection lost mid-request", fmt.Errorf("patching demo/a: %w", &url.Error{Op: "Patch", URL: "https://10.96.0.1/", Err: &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}}), "The cluster could not be reached in time, so the change may or may not have been made. Reload the page in a minute to see."},
		{"namespace being deleted", fmt.Errorf("creating userland demo/a: %w", terminating), "That environment's namespace is being deleted, so nothing can be created there."},
		{"a refusal says why", apierrors.NewConflict(gr, "a", errors.New("the object has been modified")), "The action failed: the object has been modified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, plainError(tt.err)); diff != "" {
				t.Errorf("plainError (-want +got):\n%s", diff)
			}
		})
	}
}
