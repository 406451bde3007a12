// Package actions are what people do to a Userland — start, stop, restart,
// apply a pending update — expressed as merge patches, so the dashboard and
// the kubectl plugin behave identically and need only `patch` on
// userlands (no status writes).
package actions

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// Verb names an action.
type Verb string

// The actions.
const (
	Start   Verb = "start"
	Stop    Verb = "stop"
	Restart Verb = "restart"
	// Apply restarts onto the current template, applying a pending update.
	Apply Verb = "apply"
)

// Parse checks a verb from a form or a command line.
func Parse(s string) (Verb, error) {
	switch v := Verb(s); v {
	case Start, Stop, Restart, Apply:
		return v, nil
	}
	return "", fmt.Errorf("unknown action %q: want start, stop, restart or apply", s)
}

// Actor is who takes an action, as far as suspension is concerned.
type Actor string

// Actors.
const (
	// Owner is the environment's own user.
	Owner Actor = "owner"
	// Staff is an admin, an instructor or an operator with RBAC.
	Staff Actor = "staff"
)

// ErrSuspendedByStaff refuses an owner's start of an environment that
// staff suspended.
var ErrSuspendedByStaff = errors.New("an administrator or instructor suspended this environment; only they can start it again")

// SuspendedByStaff reports whether ul is suspended by someone other than its
// owner (kubectl, GitOps, an admin or an instructor).
func SuspendedByStaff(ul *v1alpha1.Userland) bool {
	return ul.Spec.Suspend && ul.Annotations[v1alpha1.AnnotationSuspendedBy] != v1alpha1.SuspendedByOwner
}

// Patch returns the change verb by actor makes to ul at now:
//   - stop sets spec.suspend and records who suspended it;
//   - start clears it and, when the environment is stopped, sets the
//     restarted-at annotation, which the controller counts as activity so an
//     idle-stopped environment starts too. An owner cannot lift a
//     suspension staff set (ErrSuspendedByStaff);
//   - restart and apply set the restarted-at annotation, which restarts the
//     environment onto the current template whatever the rollout policy.
//
// The patch names ul's UID, so it changes nothing but ul itself.
func Patch(verb Verb, actor Actor, ul *v1alpha1.Userland, now time.Time) (client.Patch, error) {
	stamp := now.UTC().Format(time.RFC3339Nano)
	patch := map[string]any{}
	annotations := map[string]any{}
	switch verb {
	case Stop:
		patch["spec"] = map[string]any{"suspend": true}
		by := v1alpha1.SuspendedByStaff
		if actor == Owner {
			by = v1alpha1.SuspendedByOwner
		}
		if !ul.Spec.Suspend || actor == Staff {
			annotations[v1alpha1.AnnotationSuspendedBy] = by
		}
	case Start:
		if actor != Staff && SuspendedByStaff(ul) {
			return nil, ErrSuspendedByStaff
		}
		patch["spec"] = map[string]any{"suspend": false}
		annotations[v1alpha1.AnnotationSuspendedBy] = nil
		if ul.Status.Phase == v1alpha1.PhaseStopped || ul.Spec.Suspend {
			annotations[v1alpha1.AnnotationRestartedAt] = stamp
		}
	case Restart, Apply:
		annotations[v1alpha1.AnnotationRestartedAt] = stamp
	default:
		return nil, fmt.Errorf("unknown action %q", verb)
	}
	metadata := map[string]any{}
	if len(annotations) > 0 {
		metadata["annotations"] = annotations
	}
	if ul.UID != "" {
		// A precondition: the API server refuses the patch when the name
		// now holds another Userland (deleted and made again, perhaps for
		// someone else) than the one the action was decided on.
		metadata["uid"] = ul.UID
	}
	if len(metadata) > 0 {
		patch["metadata"] = metadata
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("encoding the %s patch: %w", verb, err)
	}
	return client.RawPatch(types.MergePatchType, data), nil
}

// PassOver reports whether a loop over many Userlands (a course's Start,
// Stop or Restart all, its warm-up) goes on past err from one Patch: the
// Userland is gone, or its name now holds another (Replaced). The loop's
// cache will show either soon, to be decided on afresh.
func PassOver(err error) bool {
	return apierrors.IsNotFound(err) || Replaced(err)
}

// Replaced reports whether err is the API server's refusal of a Patch
// because the name now holds another Userland than the one the action was
// decided on: "metadata.uid: field is immutable", a 422 naming that field.
// For one action it is an error to show; a loop over many (a course's Stop
// all, its warm-up) passes over it, as over one already gone, since its
// cache will show the newcomer soon, to be decided on afresh.
func Replaced(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == "metadata.uid" && cause.Type == metav1.CauseTypeFieldValueInvalid {
			return true
		}
	}
	return false
}
