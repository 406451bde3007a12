package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestAdversaryTimetableWarmupCountsWhatTheLimitCounts: course "lab",
// maxRunning 1, students a and b. a's environment from a course "lab"
// deleted and made again (labelled lab, provenance the old course's UID)
// runs. The running limit (the Userland reconciler's admit) counts every
// environment labelled into the course whose user is a student of it, so
// the course is full; the warm-up counted only the ones this course made,
// saw room for one, and stamped it: the stamp cannot start it, it joins
// the queue instead, backdated to the warm-up's start, ahead of every
// student who asks in person during the warm-up, and takes the first
// place that frees up for an environment nobody is sitting at.
func TestAdversaryTimetableWarmupCountsWhatTheLimitCounts(t *testing.T) {
	ns := env.Namespace(t)
	ctrl := startController(t)
	ctx := context.Background()
	create(t, template(ns, "lab", "example.org/lab:1"))
	now := ctrl.clock.Now()
	session := nextLocal(now, "Asia/Tokyo", time.Wednesday, 13, 0)

	old := testobj.MakeUserland(ns, "a-from-last-year", "a@uni.example", "lab").Obj()
	old.Labels = map[string]string{v1alpha1.LabelCourse: "lab"}
	old.Annotations = map[string]string{
		v1alpha1.AnnotationEnrolledBy:          "student-user",
		v1alpha1.AnnotationProvisionedByCourse: "0b3c0b3c-0000-4000-8000-000000000000",
	}
	create(t, old)
	env.WaitPhase(t, ns, old.Name, v1alpha1.PhaseReady)

	create(t, testobj.MakeCourse(ns, "lab").Term(now.Add(-24*time.Hour), now.Add(60*24*time.Hour)).
		Students("a@uni.example", "b@uni.example").Template("lab", v1alpha1.ProvisionUpFront).MaxRunning(1).
		Weekly("Wednesday", "13:00", "14:00", "Asia/Tokyo").Obj())
	// a's is there already, so the course makes b's only.
	waitCourse(t, ns, "lab", "2 provisioned", func(c *v1alpha1.Course) bool { return c.Status.Provisioned == 2 })
	var made []string
	for _, ul := range courseUserlands(t, ctx, ns, "lab") {
		if ul.Name != old.Name {
			made = append(made, ul.Name)
			env.WaitPhase(t, ns, ul.Name, v1alpha1.PhaseStopped)
		}
	}
	if len(made) == 0 {
		t.Fatal("the course made no environment (b's at least)")
	}

	setClock(ctrl, session.Add(-5*time.Minute))
	touchCourse(t, ns, "lab")
	time.Sleep(3 * time.Second) // the stamp, and the Userland reconciler's answer to it
	for _, name := range made {
		ul, err := get(t, ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if at := ul.Annotations[v1alpha1.AnnotationRestartedAt]; at != "" {
			t.Errorf("HOLE: the warm-up asked for %s (restarted-at %s) with the course at its running limit; it is %s/%s, queue place %d",
				name, at, ul.Status.Phase, ul.Status.StoppedReason, ul.Status.QueuePosition)
		}
	}
}

// TestAdversaryTimetableWarmupAtTheLimitIsQuiet: three students,
// maxRunning 1. The warm-up starts one; the course reconciling again and
// again in the warm-up (students' environments touched, a stale cache
// or not) asks for nobody else and writes nothing: no repeated stamp, no
// event, no status rewrite.
func TestAdversaryTimetableWarmupAtTheLimitIsQuiet(t *testing.T) {
	ns := env.Namespace(t)
	ctrl := startController(t)
	ctx := context.Background()
	create(t, template(ns, "lab", "example.org/lab:1"))
	now := ctrl.clock.Now()
	session := nextLocal(now, "Asia/Tokyo", time.Wednesday, 13, 0)
	create(t, testobj.MakeCourse(ns, "q").Term(now.Add(-24*time.Hour), now.Add(60*24*time.Hour)).
		Students(students(3)...).Template("lab", v1alpha1.ProvisionUpFront).MaxRunning(1).
		Weekly("Wednesday", "13:00", "14:00", "Asia/Tokyo").Obj())
	waitCourse(t, ns, "q", "3 provisioned", func(c *v1alpha1.Course) bool { return c.Status.Provisioned == 3 })
	items := courseUserlands(t, ctx, ns, "q")
	for i := range items {
		env.WaitPhase(t, ns, items[i].Name, v1alpha1.PhaseStopped)
	}

	setClock(ctrl, session.Add(-5*time.Minute))
	touchCourse(t, ns, "q")
	waitCourse(t, ns, "q", "one warm", func(c *v1alpha1.Course) bool {
		return c.Status.NextSession != nil && c.Status.NextSession.Warm == 1
	})
	time.Sleep(7 * time.Second) // the last batched status write
	before := ctrl.writes.count(ns)
	for i := range items {
		poke(t, ns, items[i].Name)
	}
	time.Sleep(7 * time.Second) // the course's 5 s batch, and then some
	if writes := ctrl.writes.count(ns) - before; writes != 0 {
		t.Errorf("the controller wrote %d times in a warm-up at its limit, want 0: %v", writes, ctrl.writes.requestsTo(ns))
	}
	stamped := 0
	for i := range items {
		if warmedAt(t, ns, items[i].Name) != "" {
			stamped++
		}
	}
	if stamped != 1 {
		t.Errorf("%d environments asked for, want 1 (maxRunning)", stamped)
	}
}
