package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// The timetable tests move the controller's clock to the instants that
// matter and make the course reconcile there (touchCourse stands in for
// the requeue timer, which runs on real time): nothing waits for a
// session.

// touchCourse changes the course's display name so it reconciles now, and
// returns it once it has, at the clock's current time.
func touchCourse(t *testing.T, ns, name string) *v1alpha1.Course {
	t.Helper()
	ctx := context.Background()
	var c v1alpha1.Course
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.DisplayName = "touched " + time.Now().Format(time.RFC3339Nano)
	if err := env.Client.Patch(ctx, &c, patch); err != nil {
		t.Fatal(err)
	}
	return waitCourse(t, ns, name, "reconciled after the clock moved", func(*v1alpha1.Course) bool { return true })
}

// setClock moves the controller's clock to at.
func setClock(r *running, at time.Time) { r.clock.Step(at.Sub(r.clock.Now())) }

// nextLocal is the first day's wall-clock hh:mm in loc on weekday that is
// at least a day after from.
func nextLocal(from time.Time, zone string, weekday time.Weekday, hh, mm int) time.Time {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		panic(err)
	}
	d := from.In(loc).AddDate(0, 0, 1)
	for d.Weekday() != weekday {
		d = d.AddDate(0, 0, 1)
	}
	return time.Date(d.Year(), d.Month(), d.Day(), hh, mm, 0, 0, loc)
}

func wantSession(t *testing.T, c *v1alpha1.Course, start, end time.Time, warm int32) {
	t.Helper()
	want := &v1alpha1.CourseSessionStatus{Start: metav1.NewTime(start.UTC()), End: metav1.NewTime(end.UTC()), Warm: warm}
	// The image pullers' counts are course_room_live_test.go's.
	if diff := cmp.Diff(want, c.Status.NextSession, cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) }),
		cmpopts.IgnoreFields(v1alpha1.CourseSessionStatus{}, "Images")); diff != "" {
		t.Errorf("status.nextSession (-want +got):\n%s", diff)
	}
}

// warmedAt is an environment's restarted-at stamp: when a warm-up (or its
// user) last asked for it; "" when nobody did.
func warmedAt(t *testing.T, ns, name string) string {
	t.Helper()
	ul, err := get(t, context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return ul.Annotations[v1alpha1.AnnotationRestartedAt]
}

func replicas(t *testing.T, ns, name string) int32 {
	t.Helper()
	var dep appsv1.Deployment
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
		t.Fatal(err)
	}
	return *dep.Spec.Replicas
}

// TestCourseTimetableTokyoWithAHoliday: a weekly Tuesday 10:00 session in
// Asia/Tokyo (no daylight saving). On a holiday nothing is warmed and the
// status shows the week after; ten minutes before that session both
// students' environments start, and the status counts them warm.
func TestCourseTimetableTokyoWithAHoliday(t *testing.T) {
	ns := env.Namespace(t)
	ctrl := startController(t)
	create(t, template(ns, "lab", "example.org/lab:1"))
	now := ctrl.clock.Now()
	holiday := nextLocal(now, "Asia/Tokyo", time.Tuesday, 10, 0)
	next := holiday.AddDate(0, 0, 7)
	create(t, testobj.MakeCourse(ns, "jp").Term(now.Add(-24*time.Hour), now.Add(60*24*time.Hour)).
		Students("a@uni.example", "b@uni.example").Template("lab", v1alpha1.ProvisionUpFront).
		Weekly("Tuesday", "10:00", "11:30", "Asia/Tokyo").Exceptions(holiday.Format(time.DateOnly)).Obj())
	c := waitCourse(t, ns, "jp", "provisioned, with its next session", func(c *v1alpha1.Course) bool {
		return c.Status.Provisioned == 2 && c.Status.NextSession != nil
	})
	wantSession(t, c, next, next.Add(90*time.Minute), 0)
	items := courseUserlands(t, context.Background(), ns, "jp")
	for i := range items {
		env.WaitPhase(t, ns, items[i].Name, v1alpha1.PhaseStopped)
	}

	// Five minutes before the holiday's session would have begun.
	setClock(ctrl, holiday.Add(-5*time.Minute))
	c = touchCourse(t, ns, "jp")
	wantSession(t, c, next, next.Add(90*time.Minute), 0)
	for i := range items {
		if at := warmedAt(t, ns, items[i].Name); at != "" {
			t.Errorf("%s was warmed on a holiday (restarted-at %s)", items[i].Name, at)
		}
	}

	// Five minutes before the next week's: warmed since 09:50 JST.
	setClock(ctrl, next.Add(-5*time.Minute))
	touchCourse(t, ns, "jp")
	for i := range items {
		env.WaitPhase(t, ns, items[i].Name, v1alpha1.PhaseReady)
		if got, want := warmedAt(t, ns, items[i].Name), next.Add(-10*time.Minute).UTC().Format(time.RFC3339); got != want {
			t.Errorf("%s restarted-at = %q, want the warm-up's start %q", items[i].Name, got, want)
		}
	}
	c = waitCourse(t, ns, "jp", "two warm", func(c *v1alpha1.Course) bool {
		return c.Status.NextSession != nil && c.Status.NextSession.Warm == 2
	})
	wantSession(t, c, next, next.Add(90*time.Minute), 2)

	// Steady state writes nothing: the course reconciling again in the
	// session (a student's environment touched) finds its status as it is.
	setClock(ctrl, next.Add(30*time.Minute))
	touchCourse(t, ns, "jp")
	// The image puller started at the warm-up has reached every node
	// (its status is the course's, so until then the course changes).
	waitCourse(t, ns, "jp", "images on every node", func(c *v1alpha1.Course) bool {
		im := c.Status.NextSession.Images
		return im != nil && im.Desired > 0 && im.Ready == im.Desired
	})
	// The template has counted both Ready (its 5 s batch; the puller's
	// pods on the simulated nodes can delay the environments' Ready past
	// the moment measured from).
	env.Eventually(t, time.Minute, "the template counts both ready", func(ctx context.Context) (bool, error) {
		var tm v1alpha1.Template
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lab"}, &tm)
		return err == nil && tm.Status.ReadyUserlands == 2, err
	})
	time.Sleep(time.Second) // the status write of the touch has been counted
	before := ctrl.writes.count(ns)
	poke(t, ns, items[0].Name)
	time.Sleep(7 * time.Second) // the course's 5 s batch, and then some
	if writes := ctrl.writes.count(ns) - before; writes != 0 {
		t.Errorf("the controller wrote %d times in the session's steady state, want 0: %v", writes, ctrl.writes.requestsTo(ns))
	}

	// After it, the week after's is next, and none are warm for it yet;
	// the environments are left to the idle rules.
	setClock(ctrl, next.Add(2*time.Hour))
	c = touchCourse(t, ns, "jp")
	wantSession(t, c, next.AddDate(0, 0, 7), next.AddDate(0, 0, 7).Add(90*time.Minute), 0)
}

// TestCourseTimetableBerlinAcrossDST: a weekly Monday 09:00 session in
// Europe/Berlin is warmed at 08:50 local on both sides of the March
// change: 07:50Z in winter time, 06:50Z in summer time.
func TestCourseTimetableBerlinAcrossDST(t *testing.T) {
	ns := env.Namespace(t)
	ctrl := startController(t)
	create(t, testobj.MakeTemplate(ns, "lab").Container("web").Image("example.org/lab:1").Volume("home", "/home/user").Idle(30*time.Minute).Obj())
	now := ctrl.clock.Now()
	winter := time.Date(2027, 3, 22, 8, 0, 0, 0, time.UTC) // 09:00 CET
	summer := time.Date(2027, 3, 29, 7, 0, 0, 0, time.UTC) // 09:00 CEST
	if !now.Before(winter.Add(-24 * time.Hour)) {
		t.Skipf("the clock (%s) is past March 2027: move the dates on", now)
	}
	create(t, testobj.MakeCourse(ns, "de").Term(now.Add(-24*time.Hour), summer.Add(30*24*time.Hour)).
		Students("a@uni.example").Template("lab", v1alpha1.ProvisionUpFront).
		Weekly("Monday", "09:00", "10:30", "Europe/Berlin").Obj())
	waitCourse(t, ns, "de", "provisioned", func(c *v1alpha1.Course) bool { return c.Status.Provisioned == 1 })
	name := courseUserlands(t, context.Background(), ns, "de")[0].Name
	env.WaitPhase(t, ns, name, v1alpha1.PhaseStopped)

	for _, session := range []time.Time{winter, summer} {
		// One minute before the warm-up: nothing yet.
		setClock(ctrl, session.Add(-11*time.Minute))
		poke(t, ns, name) // the idle stop of last week's warm-up is due
		env.WaitPhase(t, ns, name, v1alpha1.PhaseStopped)
		c := touchCourse(t, ns, "de")
		wantSession(t, c, session, session.Add(90*time.Minute), 0)
		if got := replicas(t, ns, name); got != 0 {
			t.Errorf("before the warm-up of %s: %d replicas", session, got)
		}

		setClock(ctrl, session.Add(-5*time.Minute))
		touchCourse(t, ns, "de")
		env.WaitPhase(t, ns, name, v1alpha1.PhaseReady)
		if got, want := warmedAt(t, ns, name), session.Add(-10*time.Minute).Format(time.RFC3339); got != want {
			t.Errorf("restarted-at = %q, want %q (08:50 in Berlin)", got, want)
		}
		c = waitCourse(t, ns, "de", "one warm", func(c *v1alpha1.Course) bool {
			return c.Status.NextSession != nil && c.Status.NextSession.Warm == 1
		})
		wantSession(t, c, session, session.Add(90*time.Minute), 1)
	}
}

// TestCourseTimetableWithinTheRunningLimit: four students, maxRunning 2:
// the warm-up starts the two who used theirs most recently, and nobody
// else starts or queues.
func TestCourseTimetableWithinTheRunningLimit(t *testing.T) {
	ns := env.Namespace(t)
	ctrl := startController(t)
	ctx := context.Background()
	create(t, template(ns, "lab", "example.org/lab:1"))
	now := ctrl.clock.Now()
	session := nextLocal(now, "Asia/Tokyo", time.Wednesday, 13, 0)
	roster := students(4)
	create(t, testobj.MakeCourse(ns, "big").Term(now.Add(-24*time.Hour), now.Add(60*24*time.Hour)).
		Students(roster...).Template("lab", v1alpha1.ProvisionUpFront).MaxRunning(2).
		Weekly("Wednesday", "13:00", "14:00", "Asia/Tokyo").Obj())
	waitCourse(t, ns, "big", "4 provisioned", func(c *v1alpha1.Course) bool { return c.Status.Provisioned == 4 })
	items := courseUserlands(t, ctx, ns, "big")
	names := map[string]string{}
	for i := range items {
		ul := env.WaitPhase(t, ns, items[i].Name, v1alpha1.PhaseStopped)
		names[ul.Spec.User] = ul.Name
	}
	// Last used in roster order, before their course environments were
	// made (so the visits wake nothing): the last two most recently.
	for i, user := range roster {
		ul, err := get(t, ctx, ns, names[user])
		if err != nil {
			t.Fatal(err)
		}
		recordActivity(t, ul, ul.CreationTimestamp.Add(time.Duration(i-10)*time.Minute))
	}

	setClock(ctrl, session.Add(-5*time.Minute))
	touchCourse(t, ns, "big")
	for _, user := range roster[2:] {
		env.WaitPhase(t, ns, names[user], v1alpha1.PhaseReady)
	}
	c := waitCourse(t, ns, "big", "two warm", func(c *v1alpha1.Course) bool {
		return c.Status.NextSession != nil && c.Status.NextSession.Warm == 2
	})
	wantSession(t, c, session, session.Add(time.Hour), 2)
	// Once more, with the two running: still nobody else.
	touchCourse(t, ns, "big")
	for _, user := range roster[:2] {
		ul, err := get(t, ctx, ns, names[user])
		if err != nil {
			t.Fatal(err)
		}
		if ul.Status.Phase != v1alpha1.PhaseStopped || ul.Status.StoppedReason == v1alpha1.StoppedQueued || replicas(t, ns, ul.Name) != 0 {
			t.Errorf("%s, a less recent user, is %s/%s: the warm-up went past maxRunning", user, ul.Status.Phase, ul.Status.StoppedReason)
		}
		if at := ul.Annotations[v1alpha1.AnnotationRestartedAt]; at != "" {
			t.Errorf("%s was asked for (restarted-at %s) beyond maxRunning", user, at)
		}
	}
	if c.Status.Running != 2 || c.Status.Queued != 0 {
		t.Errorf("running %d, queued %d; want 2 and 0", c.Status.Running, c.Status.Queued)
	}
}
