package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// TestAdversaryTimetableDecideWarmOthers: environments the running limit
// counts but the warm-up may not start (another course's of the same
// name, its user a student of this one) take places under maxRunning and
// are never warmed, nor part of the share.
func TestAdversaryTimetableDecideWarmOthers(t *testing.T) {
	cases := map[string]struct {
		envs       []warmEnv
		percent    int32
		maxRunning *int32
		want       []string
	}{
		"a running other fills the limit": {
			envs:    []warmEnv{{name: "old", other: true, running: true}, {name: "b"}},
			percent: 100, maxRunning: ptr.To[int32](1),
		},
		"a queued other holds its place": {
			envs:    []warmEnv{{name: "old", other: true, queued: true}, {name: "b"}, {name: "c"}},
			percent: 100, maxRunning: ptr.To[int32](2), want: []string{"b"},
		},
		"a stopped other is not warmed": {
			envs:    []warmEnv{{name: "old", other: true}, {name: "b"}},
			percent: 100, want: []string{"b"},
		},
		"others are not in the share": {
			envs:    []warmEnv{{name: "o1", other: true, running: true}, {name: "o2", other: true, running: true}, {name: "b"}, {name: "c"}},
			percent: 50, want: []string{"b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, decideWarm(tc.envs, tc.percent, tc.maxRunning)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestAdversaryTimetableStartAskedBeforeTheWarmup: a student clicked
// Start a minute before the warm-up began (restarted-at W-1m, after the
// environment's last stop); the Userland reconciler is behind at class
// time, so the cache does not show it running yet. The warm-up took it
// for stopped and unasked, and stamped restarted-at W over W-1m: the pod
// template's stamp changes, so a pod that had started restarts (losing
// what the student did in it), and the start that was on its way took
// no place under maxRunning, so the warm-up could stamp one too many.
// It is starting: it takes its place and is not asked again.
func TestAdversaryTimetableStartAskedBeforeTheWarmup(t *testing.T) {
	w := time.Date(2026, 12, 2, 3, 50, 0, 0, time.UTC)
	ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{
		Name: "s", CreationTimestamp: metav1.NewTime(w.Add(-7 * 24 * time.Hour)),
		Annotations: map[string]string{v1alpha1.AnnotationRestartedAt: w.Add(-time.Minute).Format(time.RFC3339Nano)},
	}}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationIdleStoppedAt: w.Add(-24 * time.Hour).Format(time.RFC3339)}},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](0)},
	}
	e, _ := warmEnvOf(ul, dep, w)
	if !e.starting {
		t.Errorf("HOLE: an environment its user asked for after its last stop, not running yet, is not starting: %+v", e)
	}
	if got := decideWarm([]warmEnv{e, {name: "t"}}, 100, ptr.To[int32](1)); len(got) != 0 {
		t.Errorf("HOLE: with maxRunning 1 and one start on its way the warm-up stamps %v", got)
	}
	// Asked before its last stop: stopped, to be warmed.
	dep.Annotations[AnnotationIdleStoppedAt] = w.Add(-30 * time.Second).Format(time.RFC3339)
	if e, _ := warmEnvOf(ul, dep, w); e.starting || e.asked {
		t.Errorf("stopped since it was asked for, yet %+v", e)
	}
}
