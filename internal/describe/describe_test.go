package describe

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// told is everything a person is told of one environment, from each place
// that tells it.
type told struct {
	Environment Description
	Column      string
	Waiting     string
	CourseHold  string
}

func TestEveryStateIsToldOnce(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 5, 10, 0, 0, 0, time.UTC)
	soon := now.Add(3 * time.Minute)
	env := func(phase v1alpha1.Phase, reason v1alpha1.StoppedReason, ready string, mutate ...func(*v1alpha1.Userland)) *v1alpha1.Userland {
		ul := &v1alpha1.Userland{Spec: v1alpha1.UserlandSpec{User: "alice", TemplateRef: v1alpha1.TemplateReference{Name: "vscode"}}}
		ul.Status.Phase, ul.Status.StoppedReason = phase, reason
		if ready != "" {
			ul.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "X", Message: ready}}
		}
		for _, m := range mutate {
			m(ul)
		}
		return ul
	}
	activeAgo := func(d time.Duration) func(*v1alpha1.Userland) {
		return func(ul *v1alpha1.Userland) { ul.Status.LastActivityTime = &metav1.Time{Time: now.Add(-d)} }
	}
	ofCourse := func(ul *v1alpha1.Userland) { ul.Labels = map[string]string{v1alpha1.LabelCourse: "cs101"} }
	third := func(ul *v1alpha1.Userland) { ul.Status.QueuePosition = 3 }
	suspended := func(ul *v1alpha1.Userland) { ul.Spec.Suspend = true }
	warned := func(ul *v1alpha1.Userland) { ul.Status.IdleStopTime = &metav1.Time{Time: soon} }
	readyTrue := func(ul *v1alpha1.Userland) { ul.Status.Conditions[0].Status = metav1.ConditionTrue }

	for _, tc := range []struct {
		name string
		ul   *v1alpha1.Userland
		want told
	}{{
		name: "new: nothing from the controller yet",
		ul:   env("", "", ""),
		want: told{Environment: Description{Phase: "Pending", Running: true}, Column: "Pending"},
	}, {
		name: "starting: the controller's word",
		ul:   env(v1alpha1.PhaseStarting, "", "pulling the image"),
		want: told{Environment: Description{Phase: "Starting", Message: "pulling the image", Running: true},
			Column: "Starting", Waiting: "pulling the image"},
	}, {
		name: "ready, an idle stop near",
		ul:   env(v1alpha1.PhaseReady, "", "ready", readyTrue, warned),
		want: told{Environment: Description{Phase: "Ready", Message: "ready", Running: true, IdleStopAt: &soon}, Column: "Ready"},
	}, {
		name: "failed",
		ul:   env(v1alpha1.PhaseFailed, "", "ImagePullBackOff: no such image"),
		want: told{Environment: Description{Phase: "Failed", Message: "ImagePullBackOff: no such image", Running: true},
			Column: "Failed", Waiting: "ImagePullBackOff: no such image"},
	}, {
		name: "idle",
		ul:   env(v1alpha1.PhaseStopped, v1alpha1.StoppedIdle, "stopped after no activity", activeAgo(90*time.Minute), warned),
		want: told{Environment: Description{Phase: "Stopped", Message: "stopped because nobody used it; opening it starts it again"},
			Column:  "Stopped (Idle)",
			Waiting: "It was stopped because nobody had used it since 1h30m ago, to free the cluster for others. It is starting again now; your files were kept."},
	}, {
		name: "made by a course, never opened",
		ul:   env(v1alpha1.PhaseStopped, v1alpha1.StoppedNotStarted, "not started yet", ofCourse),
		want: told{Environment: Description{Phase: "Stopped", Message: "not started yet; opening it starts it"},
			Column: "Stopped (NotStarted)", Waiting: "It is starting for the first time."},
	}, {
		name: "queued, third",
		ul:   env(v1alpha1.PhaseStopped, v1alpha1.StoppedQueued, "waiting for one of the 2 places of course cs101: number 3 in line", ofCourse, third),
		want: told{Environment: Description{Phase: "Queued", Message: "waiting for one of the 2 places of course cs101: number 3 in line", Running: true},
			Column:  "Stopped (Queued, 3 in line)",
			Waiting: "Your course allows only so many environments running at once, and all are in use. You are number 3 in line; this page starts yours as soon as a place is free."},
	}, {
		name: "before the term",
		ul:   env(v1alpha1.PhaseStopped, v1alpha1.StoppedBeforeTerm, "course cs101 starts at 2026-10-12T08:00:00Z", ofCourse),
		want: told{Environment: Description{Phase: "BeforeTerm", Message: "course cs101 starts at 2026-10-12T08:00:00Z"},
			Column: "Stopped (BeforeTerm)", Waiting: "course cs101 starts at 2026-10-12T08:00:00Z",
			CourseHold: "Your course has not started yet (course cs101 starts at 2026-10-12T08:00:00Z). The environment can be started from then on."},
	}, {
		name: "the term ended",
		ul:   env(v1alpha1.PhaseStopped, v1alpha1.StoppedTermEnded, "course cs101 ended at 2026-09-01T00:00:00Z", ofCourse),
		want: told{Environment: Description{Phase: "TermEnded", Message: "course cs101 ended at 2026-09-01T00:00:00Z"},
			Column: "Stopped (TermEnded)", Waiting: "course cs101 ended at 2026-09-01T00:00:00Z",
			CourseHold: "Your course has ended (course cs101 ended at 2026-09-01T00:00:00Z), so its environments are stopped. Ask your instructor if you need your files."},
	}, {
		name: "off the roster",
		ul:   env(v1alpha1.PhaseStopped, v1alpha1.StoppedUnenrolled, "alice is no longer on the roster of course cs101", ofCourse),
		want: told{Environment: Description{Phase: "Unenrolled", Message: "alice is no longer on the roster of course cs101"},
			Column: "Stopped (Unenrolled)", Waiting: "alice is no longer on the roster of course cs101",
			CourseHold: "You are no longer on this course's roster, so its environment stays stopped. Ask your instructor if this is a mistake."},
	}, {
		name: "suspended",
		ul:   env(v1alpha1.PhaseStopped, v1alpha1.StoppedSuspended, "suspended (spec.suspend is true)", suspended),
		want: told{Environment: Description{Phase: "Stopped", Message: "stopped"},
			Column: "Stopped (Suspended)", Waiting: "suspended (spec.suspend is true)"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := told{Environment: Environment(tc.ul), Column: Column(tc.ul), Waiting: Waiting(tc.ul, now), CourseHold: CourseHold(tc.ul)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestTitle(t *testing.T) {
	t.Parallel()
	ul := &v1alpha1.Userland{Spec: v1alpha1.UserlandSpec{TemplateRef: v1alpha1.TemplateReference{Name: "vscode"}}}
	if got := Title(ul); got != "vscode" {
		t.Errorf("without a display name: %q, want the template's name", got)
	}
	ul.Status.DisplayName = "VS Code"
	if got := Title(ul); got != "VS Code" {
		t.Errorf("with one: %q, want it", got)
	}
}

func TestCourseStop(t *testing.T) {
	t.Parallel()
	c := &v1alpha1.Course{ObjectMeta: metav1.ObjectMeta{Name: "cs101"}}
	c.Spec.Term.Start = metav1.NewTime(time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC))
	c.Spec.Term.End = metav1.NewTime(time.Date(2027, 1, 31, 18, 0, 0, 0, time.UTC))
	c.Spec.Limits.MaxRunning = ptr.To[int32](40)
	for reason, want := range map[v1alpha1.StoppedReason]string{
		v1alpha1.StoppedQueued:     "waiting for one of the 40 places of course cs101: number 7 in line",
		v1alpha1.StoppedBeforeTerm: "course cs101 starts at 2026-09-01T08:00:00Z",
		v1alpha1.StoppedTermEnded:  "course cs101 ended at 2027-01-31T18:00:00Z",
		v1alpha1.StoppedUnenrolled: "alice is no longer on the roster of course cs101",
	} {
		if got := CourseStop(c, reason, 7, "alice"); got != want {
			t.Errorf("%s: %q, want %q", reason, got, want)
		}
	}
}
