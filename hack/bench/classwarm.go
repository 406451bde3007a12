package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/testenv"
)

// classWarmResult is one class start as a course's session begins: cold
// (every environment stopped when its student arrives) or warmed (the
// course's timetable started them during the session's warm-up).
type classWarmResult struct {
	Warmed   bool
	Students []studentRun
	// WarmedIn is from the schedule's write to every environment Ready
	// (warmed runs only); Warm is status.nextSession.warm then.
	WarmedIn time.Duration
	Warm     int32
}

// classWarm runs the class start of a course of n students twice, cold
// and warmed, each with a controller and gateway of their own (shipped
// limits) and a namespace of its own.
func classWarm(ctx context.Context, n int, window time.Duration, env *testenv.Environment, c client.WithWatch, dir, bin, upAddr string) ([]classWarmResult, error) {
	var out []classWarmResult
	for _, warmed := range []bool{false, true} {
		r, err := classWarmRun(ctx, n, window, warmed, env, c, dir, bin, upAddr)
		if err != nil {
			return nil, fmt.Errorf("class start of a course (warmed %v): %w", warmed, err)
		}
		out = append(out, *r)
	}
	return out, nil
}

func classWarmRun(ctx context.Context, n int, window time.Duration, warmed bool, env *testenv.Environment, c client.WithWatch, dir, bin, upAddr string) (*classWarmResult, error) {
	limits := classLimitSets["shipped"]
	limits.Key = map[bool]string{false: "course-cold", true: "course-warmed"}[warmed]
	ns := "class-" + limits.Key
	logf("class start of a course, %s: %d students within %s", limits.Key, n, window)
	ref := v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: "lab"}
	if err := namespace(ctx, c, ns); err != nil {
		return nil, err
	}
	tmpl := benchTemplate(ns)
	tmpl.Name = ref.Name
	tmpl.Spec.Idle = &v1alpha1.IdleSpec{Timeout: metav1.Duration{Duration: 30 * time.Minute}}
	if err := c.Create(ctx, tmpl); err != nil {
		return nil, err
	}
	now := time.Now()
	crs := &v1alpha1.Course{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "class"},
		Spec: v1alpha1.CourseSpec{
			Term:      v1alpha1.CourseTerm{Start: metav1.NewTime(now.Add(-time.Hour)), End: metav1.NewTime(now.Add(24 * time.Hour))},
			Templates: []v1alpha1.CourseTemplate{{Kind: ref.Kind, Name: ref.Name, Provision: v1alpha1.ProvisionOnSignIn}},
		},
	}
	for i := range n {
		crs.Spec.Students.Users = append(crs.Spec.Students.Users, studentName(i))
	}
	if err := c.Create(ctx, crs); err != nil {
		return nil, err
	}
	ctrl, _, err := startClassController(ctx, env, dir, bin, limits)
	if err != nil {
		return nil, err
	}
	defer ctrl.stop()
	// As the course's roster provisions them: labelled into the course,
	// never started (an environment starts when its user first opens it).
	logf("  %d students' environments of the course: created, not started", n)
	err = createAll(ctx, n, func(i int) []client.Object {
		ul := course.NewUserland(crs, studentName(i), course.BasisStudentUser, ref)
		ul.Name = naming.CandidateNames(ul.Spec.User, ref)[0]
		return []client.Object{ul}
	}, c)
	if err != nil {
		return nil, err
	}
	if err := waitUserlands(ctx, c, ns, n, func(ul *v1alpha1.Userland) bool { return ul.Status.Phase == v1alpha1.PhaseStopped }); err != nil {
		return nil, err
	}
	gw, _, gwAddr, err := startClassGateway(ctx, env, dir, bin, upAddr, limits, n)
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	res := &classWarmResult{Warmed: warmed}
	if warmed {
		session := warmSession(time.Now(), 3*time.Minute, time.Hour)
		patch := client.MergeFrom(crs.DeepCopy())
		crs.Spec.Schedule = &v1alpha1.CourseSchedule{Sessions: []v1alpha1.CourseSession{session}}
		t0 := time.Now()
		if err := c.Patch(ctx, crs, patch); err != nil {
			return nil, fmt.Errorf("adding the session: %w", err)
		}
		if err := waitUserlands(ctx, c, ns, n, func(ul *v1alpha1.Userland) bool { return ul.Status.Phase == v1alpha1.PhaseReady }); err != nil {
			return nil, fmt.Errorf("waiting for the warm-up: %w", err)
		}
		res.WarmedIn = time.Since(t0)
		// The course's status follows its environments' by a reconcile.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(crs), crs); err != nil {
				return nil, err
			}
			if next := crs.Status.NextSession; next != nil {
				res.Warm = next.Warm
			}
			if int(res.Warm) >= n || time.Now().After(deadline) {
				break
			}
		}
		logf("  the session's warm-up started all %d in %s (status: %d warm)", n, res.WarmedIn.Round(time.Millisecond), res.Warm)
	}
	res.Students = signInStorm(ctx, n, window, gwAddr, ns, ref, func(int) bool { return false })
	f := figures(classResult{Students: res.Students})
	logf("  sign-in → first byte p50 %s p99 %s, %d of %d reached, %d errors", f.Total.P50.Round(time.Millisecond), f.Total.P99.Round(time.Millisecond), f.Reached, n, f.Errors)
	gw.stop()
	ctrl.stop()
	logf("  deleting %s", ns)
	if _, err := deleteNamespace(ctx, c, ns); err != nil {
		return nil, err
	}
	return res, nil
}

// warmSession is a session on one date, starting lead after now (on a
// whole minute) and lasting length, in a fixed-offset zone (Etc/GMT±N)
// chosen so that it starts at noon's hour locally: a session's start and
// end must fall on the same local day, whatever the hour the bench runs.
func warmSession(now time.Time, lead, length time.Duration) v1alpha1.CourseSession {
	start := now.Add(lead).UTC().Truncate(time.Minute).Add(time.Minute)
	offset := 12 - start.Hour() // UTC+offset puts start at 12:xx; -11…12
	// The POSIX-style names invert the sign: Etc/GMT-9 is UTC+9.
	zone := "Etc/GMT"
	switch {
	case offset > 0:
		zone = fmt.Sprintf("Etc/GMT-%d", offset)
	case offset < 0:
		zone = fmt.Sprintf("Etc/GMT+%d", -offset)
	}
	local := start.In(time.FixedZone(zone, offset*3600))
	end := local.Add(length)
	date := local.Format(time.DateOnly)
	return v1alpha1.CourseSession{Date: &date, Start: local.Format("15:04"), End: end.Format("15:04"), TimeZone: zone}
}
