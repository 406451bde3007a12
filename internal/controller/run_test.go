package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestDecideRun: "should this environment run now?" as one decision, over
// the namespace's access, suspend, idleness and the course's term, roster
// and running limit; the Deployment's bookkeeping, the requeue and the
// queue place come with it.
func TestDecideRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 5, 10, 0, 0, 0, time.UTC)
	created := now.Add(-48 * time.Hour)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }

	env := func(mutate ...func(*v1alpha1.Userland)) *v1alpha1.Userland {
		ul := testobj.MakeUserland("ns", "alice", "alice", "lab").Obj()
		ul.CreationTimestamp = metav1.NewTime(created)
		for _, m := range mutate {
			m(ul)
		}
		return ul
	}
	active := func(d time.Duration) func(*v1alpha1.Userland) {
		return func(ul *v1alpha1.Userland) { ul.Status.LastActivityTime = &metav1.Time{Time: now.Add(d)} }
	}
	restarted := func(d time.Duration) func(*v1alpha1.Userland) {
		return func(ul *v1alpha1.Userland) {
			ul.Annotations = map[string]string{v1alpha1.AnnotationRestartedAt: stamp(now.Add(d))}
		}
	}
	suspended := func(ul *v1alpha1.Userland) { ul.Spec.Suspend = true }
	deployment := func(replicas int32, annotations map[string]string) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		}
	}
	running := func(since time.Duration) *appsv1.Deployment {
		return deployment(1, map[string]string{AnnotationStartedAt: stamp(now.Add(since))})
	}
	idleStopped := func(since time.Duration) *appsv1.Deployment {
		return deployment(0, map[string]string{AnnotationIdleStoppedAt: stamp(now.Add(since))})
	}
	hour := &v1alpha1.IdleSpec{Timeout: metav1.Duration{Duration: time.Hour}}
	inTerm := func() *testobj.CourseWrapper {
		return testobj.MakeCourse("ns", "cs101").Term(now.Add(-24*time.Hour), now.Add(30*24*time.Hour)).
			Students("alice").Template("lab", v1alpha1.ProvisionUpFront)
	}
	limited := inTerm().MaxRunning(1).Obj()
	ended := testobj.MakeCourse("ns", "cs101").Term(now.Add(-30*24*time.Hour), now.Add(-time.Hour)).
		Students("alice").Template("lab", v1alpha1.ProvisionUpFront).Obj()
	toTermEnd := 30 * 24 * time.Hour

	noAdmit := func(int, time.Time) (int, error) {
		t.Error("Admit was asked, though the running limit does not apply")
		return 0, nil
	}
	queueAt := func(place int, wantSince time.Time) func(int, time.Time) (int, error) {
		return func(max int, since time.Time) (int, error) {
			if max != 1 || !since.Equal(wantSince) {
				t.Errorf("Admit(%d, %s), want (1, %s)", max, since, wantSince)
			}
			return place, nil
		}
	}

	for _, tc := range []struct {
		name string
		in   RunInput
		want RunDecision
	}{{
		name: "new, never stops: runs, started now",
		in:   RunInput{Userland: env()},
		want: RunDecision{Running: true, Annotations: map[string]string{AnnotationStartedAt: stamp(now)},
			AskedSince: created, LastActive: now},
	}, {
		name: "running keeps its start",
		in:   RunInput{Userland: env(), Deployment: running(-time.Minute)},
		want: RunDecision{Running: true, WasRunning: true, Annotations: map[string]string{AnnotationStartedAt: stamp(now.Add(-time.Minute))},
			AskedSince: created, LastActive: now.Add(-time.Minute)},
	}, {
		name: "suspended",
		in:   RunInput{Userland: env(suspended), Deployment: running(-time.Minute)},
		want: RunDecision{WasRunning: true, StopReason: v1alpha1.StoppedSuspended, Annotations: map[string]string{},
			AskedSince: created, LastActive: now.Add(-time.Minute)},
	}, {
		name: "namespace not allowed: stopped, not idle, no reason of its own",
		in:   RunInput{Userland: env(), Idle: hour, NotAllowed: true, Deployment: running(-time.Minute)},
		want: RunDecision{WasRunning: true, Annotations: map[string]string{},
			AskedSince: created, LastActive: now.Add(-time.Minute)},
	}, {
		name: "idle for the timeout: stops now",
		in:   RunInput{Userland: env(active(-2 * time.Hour)), Idle: hour, Deployment: running(-3 * time.Hour)},
		want: RunDecision{WasRunning: true, StopReason: v1alpha1.StoppedIdle, IdleStopped: true,
			Annotations: map[string]string{AnnotationIdleStoppedAt: stamp(now)},
			AskedSince:  now.Add(-2 * time.Hour), LastActive: now.Add(-2 * time.Hour)},
	}, {
		name: "near the idle stop: warned, back at the deadline",
		in:   RunInput{Userland: env(active(-58 * time.Minute)), Idle: hour, Deployment: running(-3 * time.Hour)},
		want: RunDecision{Running: true, WasRunning: true, WarnStopAt: at(2 * time.Minute), RequeueAfter: 2 * time.Minute,
			Annotations: map[string]string{AnnotationStartedAt: stamp(now.Add(-3 * time.Hour))},
			AskedSince:  now.Add(-58 * time.Minute), LastActive: now.Add(-58 * time.Minute)},
	}, {
		name: "idle-stopped stays stopped, its stop kept",
		in:   RunInput{Userland: env(active(-2 * time.Hour)), Idle: hour, Deployment: idleStopped(-time.Hour)},
		want: RunDecision{StopReason: v1alpha1.StoppedIdle, Annotations: map[string]string{AnnotationIdleStoppedAt: stamp(now.Add(-time.Hour))},
			AskedSince: now.Add(-2 * time.Hour), LastActive: now},
	}, {
		name: "activity after an idle stop wakes it",
		in:   RunInput{Userland: env(active(-time.Second)), Idle: hour, Deployment: idleStopped(-time.Hour)},
		want: RunDecision{Running: true, Woken: true,
			Annotations: map[string]string{AnnotationStartedAt: stamp(now)},
			AskedSince:  now.Add(-time.Second), LastActive: now},
	}, {
		name: "a restart request is asking: it wakes too",
		in:   RunInput{Userland: env(active(-2*time.Hour), restarted(-time.Second)), Idle: hour, Deployment: idleStopped(-time.Hour)},
		want: RunDecision{Running: true, Woken: true,
			Annotations: map[string]string{AnnotationStartedAt: stamp(now)},
			AskedSince:  now.Add(-time.Second), LastActive: now},
	}, {
		name: "made by its course, never opened: not started, stopped since made",
		in:   RunInput{Userland: env(), Idle: hour, Course: inTerm().Obj(), Role: course.Student, Admit: noAdmit},
		want: RunDecision{StopReason: v1alpha1.StoppedNotStarted, RequeueAfter: toTermEnd,
			Annotations: map[string]string{AnnotationIdleStoppedAt: stamp(created)},
			AskedSince:  created, LastActive: now},
	}, {
		name: "opened by a student in term, no limit: runs until the term ends",
		in:   RunInput{Userland: env(active(-time.Second)), Course: inTerm().Obj(), Role: course.Student, Admit: noAdmit},
		want: RunDecision{Running: true, RequeueAfter: toTermEnd, Annotations: map[string]string{AnnotationStartedAt: stamp(now)},
			AskedSince: now.Add(-time.Second), LastActive: now},
	}, {
		name: "the term ended: stopped as if idle, with the course's reason",
		in:   RunInput{Userland: env(active(-time.Second)), Course: ended, Role: course.Student, Deployment: running(-time.Hour)},
		want: RunDecision{WasRunning: true, StopReason: v1alpha1.StoppedTermEnded,
			Annotations: map[string]string{AnnotationIdleStoppedAt: stamp(now)},
			AskedSince:  now.Add(-time.Second), LastActive: now.Add(-time.Second)},
	}, {
		name: "staff outlive the term",
		in:   RunInput{Userland: env(active(-time.Second)), Course: ended, Role: course.Staff, Deployment: running(-time.Hour), Admit: noAdmit},
		want: RunDecision{Running: true, WasRunning: true, Annotations: map[string]string{AnnotationStartedAt: stamp(now.Add(-time.Hour))},
			AskedSince: now.Add(-time.Second), LastActive: now.Add(-time.Second)},
	}, {
		name: "off the roster, never opened: the course's reason wins",
		in:   RunInput{Userland: env(), Idle: hour, Course: inTerm().Obj(), Role: course.None},
		want: RunDecision{StopReason: v1alpha1.StoppedUnenrolled, RequeueAfter: toTermEnd,
			Annotations: map[string]string{AnnotationIdleStoppedAt: stamp(created)},
			AskedSince:  created, LastActive: now},
	}, {
		name: "the running limit is full: queued, second, stopped since it was idle-stopped",
		in: RunInput{Userland: env(active(-time.Second)), Course: limited, Role: course.Student,
			Deployment: idleStopped(-time.Hour), Admit: queueAt(2, now.Add(-time.Second))},
		want: RunDecision{StopReason: v1alpha1.StoppedQueued, QueuePosition: 2, RequeueAfter: toTermEnd,
			Annotations: map[string]string{AnnotationIdleStoppedAt: stamp(now.Add(-time.Hour))},
			AskedSince:  now.Add(-time.Second), LastActive: now},
	}, {
		name: "admitted under the limit",
		in: RunInput{Userland: env(active(-time.Second)), Course: limited, Role: course.Student,
			Deployment: idleStopped(-time.Hour), Admit: queueAt(0, now.Add(-time.Second))},
		want: RunDecision{Running: true, Woken: true, RequeueAfter: toTermEnd, Annotations: map[string]string{AnnotationStartedAt: stamp(now)},
			AskedSince: now.Add(-time.Second), LastActive: now},
	}, {
		name: "the limit bounds starts, not work in progress",
		in: RunInput{Userland: env(active(-time.Second)), Course: limited, Role: course.Student,
			Deployment: running(-time.Hour), Admit: noAdmit},
		want: RunDecision{Running: true, WasRunning: true, RequeueAfter: toTermEnd,
			Annotations: map[string]string{AnnotationStartedAt: stamp(now.Add(-time.Hour))},
			AskedSince:  now.Add(-time.Second), LastActive: now.Add(-time.Second)},
	}, {
		name: "a suspended course environment is only suspended",
		in:   RunInput{Userland: env(suspended), Course: ended, Role: course.Student},
		want: RunDecision{StopReason: v1alpha1.StoppedSuspended, Annotations: map[string]string{},
			AskedSince: created, LastActive: now},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = now
			got, err := decideRun(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("decideRun (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideRunPassesOnTheQueuesError: the queue reads the cache; when it
// cannot, nothing is decided and the reconcile is retried.
func TestDecideRunPassesOnTheQueuesError(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 5, 10, 0, 0, 0, time.UTC)
	ul := testobj.MakeUserland("ns", "alice", "alice", "lab").Obj()
	ul.Status.LastActivityTime = &metav1.Time{Time: now}
	c := testobj.MakeCourse("ns", "cs101").Term(now.Add(-time.Hour), now.Add(time.Hour)).Students("alice").
		Template("lab", v1alpha1.ProvisionUpFront).MaxRunning(1).Obj()
	boom := errors.New("cache not synced")
	_, err := decideRun(RunInput{Now: now, Userland: ul, Course: c, Role: course.Student,
		Admit: func(int, time.Time) (int, error) { return 0, boom }})
	if !errors.Is(err, boom) {
		t.Fatalf("decideRun: %v, want the queue's error", err)
	}
}
