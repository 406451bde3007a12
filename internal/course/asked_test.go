package course

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
)

func TestWhenTheUserAsked(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC)
	active := created.Add(time.Hour)
	restart := created.Add(2 * time.Hour)
	ul := func(activity *time.Time, restartedAt string) *v1alpha1.Userland {
		u := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		if activity != nil {
			u.Status.LastActivityTime = &metav1.Time{Time: *activity}
		}
		if restartedAt != "" {
			u.Annotations = map[string]string{v1alpha1.AnnotationRestartedAt: restartedAt}
		}
		return u
	}
	early := created.Add(30 * time.Minute)
	for _, tc := range []struct {
		name      string
		ul        *v1alpha1.Userland
		lastAsked *time.Time
		since     time.Time
	}{
		{"never asked: created", ul(nil, ""), nil, created},
		{"activity", ul(&active, ""), &active, active},
		{"a restart request alone", ul(nil, restart.Format(time.RFC3339)), &restart, restart},
		{"a restart after the activity", ul(&active, restart.Format(time.RFC3339)), &restart, restart},
		{"activity after the restart", ul(&active, early.Format(time.RFC3339)), &active, active},
		{"an unreadable request is none", ul(&active, "soon"), &active, active},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.lastAsked, LastAsked(tc.ul)); diff != "" {
				t.Errorf("LastAsked (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.since, AskedSince(tc.ul)); diff != "" {
				t.Errorf("AskedSince (-want +got):\n%s", diff)
			}
		})
	}
}
