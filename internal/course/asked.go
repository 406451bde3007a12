package course

import (
	"time"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// LastAsked is when the user last asked for their environment: the later
// of its last activity (status.lastActivityTime, written by the gateway)
// and a start or restart request (the restartedAt annotation, written by
// the dashboard and the plugin). Nil when nobody ever has. A request counts
// as activity, so it also wakes an idle-stopped environment; and it is
// what places a student in a course's queue.
func LastAsked(ul *v1alpha1.Userland) *time.Time {
	var asked *time.Time
	if t := ul.Status.LastActivityTime; t != nil {
		at := t.Time
		asked = &at
	}
	requested, err := time.Parse(time.RFC3339, ul.Annotations[v1alpha1.AnnotationRestartedAt])
	if err == nil && (asked == nil || requested.After(*asked)) {
		asked = &requested
	}
	return asked
}

// AskedSince is when the environment asked to run: LastAsked, or its
// creation when nobody asked (a course makes its roster's environments
// ahead of use). Its course's queue orders by it.
func AskedSince(ul *v1alpha1.Userland) time.Time {
	if asked := LastAsked(ul); asked != nil {
		return *asked
	}
	return ul.CreationTimestamp.Time
}
