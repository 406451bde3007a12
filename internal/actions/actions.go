// Package actions are what people do to a Userland — start, stop, restart,
// apply a pending update — expressed as merge patches, so the dashboard and
// the kubectl plugin behave identically and need only `patch` on
// userlands (no status writes).
package actions

import (
	"encoding/json"
	"fmt"
	"time"

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

// Patch returns the change verb makes to ul at now:
//   - stop sets spec.suspend;
//   - start clears it and, when the environment is stopped, sets the
//     restarted-at annotation, which the controller counts as activity so an
//     idle-stopped environment starts too;
//   - restart and apply set the restarted-at annotation, which restarts the
//     environment onto the current template whatever the rollout policy.
func Patch(verb Verb, ul *v1alpha1.Userland, now time.Time) (client.Patch, error) {
	stamp := now.UTC().Format(time.RFC3339Nano)
	patch := map[string]any{}
	restart := func() {
		patch["metadata"] = map[string]any{"annotations": map[string]string{v1alpha1.AnnotationRestartedAt: stamp}}
	}
	switch verb {
	case Stop:
		patch["spec"] = map[string]any{"suspend": true}
	case Start:
		patch["spec"] = map[string]any{"suspend": false}
		if ul.Status.Phase == v1alpha1.PhaseStopped || ul.Spec.Suspend {
			restart()
		}
	case Restart, Apply:
		restart()
	default:
		return nil, fmt.Errorf("unknown action %q", verb)
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("encoding the %s patch: %w", verb, err)
	}
	return client.RawPatch(types.MergePatchType, data), nil
}
