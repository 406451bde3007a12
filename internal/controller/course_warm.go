package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/timetable"
)

// warmEnv is one student environment as the warm-up decision sees it.
type warmEnv struct {
	name string
	// lastUsed is status.lastActivityTime, zero when never used.
	lastUsed time.Time
	// running: its Deployment has a replica (as the running limit counts).
	running bool
	// queued: it waits for limits.maxRunning already.
	queued bool
	// suspended: someone stopped it on purpose; a warm-up never undoes that.
	suspended bool
	// asked: somebody (its user, or this warm-up) asked for it since the
	// warm-up began, so it is warm or on its way, and is not asked again.
	asked bool
	// starting: asked for (before the warm-up or since) and not stopped
	// since, so the Userland reconciler is about to start it (the cache
	// does not show it running yet): it takes a place under the running
	// limit already, and is not asked again.
	starting bool
	// other: not one the warm-up may start (course.StaffMayReach), but
	// one the running limit counts (labelled into the course, its user
	// a student of it, such as one from an earlier course of the same
	// name): it takes a place when running, starting or queued, and is
	// neither warmed nor part of the share.
	other bool
}

// decideWarm picks the stopped environments to start for a session's
// warm-up, most recently used first (never used last, then by name): as
// many as make percent of all the course's student environments running
// or asked for, and no more than limits.maxRunning leaves room for after
// those running or starting and those already waiting in its queue (who
// asked themselves, so come first). Nil maxRunning is no limit.
func decideWarm(envs []warmEnv, percent int32, maxRunning *int32) []string {
	own := 0
	for _, e := range envs {
		if !e.other {
			own++
		}
	}
	target := (own*int(percent) + 99) / 100
	var candidates []warmEnv
	running, queued, counted := 0, 0, 0
	for _, e := range envs {
		switch {
		case e.running, e.starting:
			running++
			if !e.other {
				counted++
			}
		case e.queued:
			queued++
			if !e.other {
				counted++
			}
		case e.other:
		case e.asked:
			counted++
		case !e.suspended:
			candidates = append(candidates, e)
		}
	}
	n := target - counted
	if maxRunning != nil {
		n = min(n, int(*maxRunning)-running-queued)
	}
	if n <= 0 {
		return nil
	}
	slices.SortFunc(candidates, func(a, b warmEnv) int {
		return cmp.Or(b.lastUsed.Compare(a.lastUsed), cmp.Compare(a.name, b.name))
	})
	names := make([]string, 0, min(n, len(candidates)))
	for _, e := range candidates[:min(n, len(candidates))] {
		names = append(names, e.name)
	}
	return names
}

// schedule reads the course's timetable, reports its next session in the
// status, starts the environments a warm-up calls for, and asks to be run
// again at the timetable's next deadline exactly.
func (r *CourseReconciler) schedule(ctx context.Context, s *courseState) (ctrl.Result, error) {
	s.c.Status.NextSession = nil
	if s.c.Spec.Schedule == nil {
		return ctrl.Result{}, nil
	}
	term := timetable.Window{From: s.c.Spec.Term.Start.Time, Until: s.c.Spec.Term.End.Time}
	tt, err := timetable.At(s.c.Spec.Schedule, term, s.now)
	if err != nil {
		// The schema and the webhook refuse such sessions; one admitted
		// by an older version is skipped, and the others still count.
		ctrl.LoggerFrom(ctx).Error(err, "skipping sessions of the course's schedule")
	}
	var result ctrl.Result
	if !tt.Recheck.IsZero() {
		// The exact deadline: a warm-up begins, a session starts or ends.
		result.RequeueAfter = tt.Recheck.Sub(s.now)
	}
	if tt.Next != nil {
		s.c.Status.NextSession = &v1alpha1.CourseSessionStatus{
			Start: metav1.NewTime(tt.Next.Start), End: metav1.NewTime(tt.Next.End),
		}
		if tt.Warm(s.now) {
			s.c.Status.NextSession.Warm = r.countWarm(s)
		}
	}
	s.holdRoom = holdsRoom(tt, s.now, course.PhaseAt(s.c, s.now))
	if tt.Warming == nil || course.PhaseAt(s.c, s.now) != v1alpha1.CourseInTerm {
		return result, nil
	}
	return result, r.warm(ctx, s, tt.Warming)
}

// countWarm counts the course's student environments running or starting.
func (r *CourseReconciler) countWarm(s *courseState) int32 {
	var n int32
	for i := range s.userlands {
		ul := &s.userlands[i]
		if isStudentEnv(s.c, ul) && (ul.Status.Phase == v1alpha1.PhaseReady || ul.Status.Phase == v1alpha1.PhaseStarting) {
			n++
		}
	}
	return n
}

// isStudentEnv is what a warm-up may start: exactly what the course's
// staff may reach and start from the course page (course.StaffMayReach),
// environments the course made for its current students, never staff's
// own or a student's from outside the course.
func isStudentEnv(c *v1alpha1.Course, ul *v1alpha1.Userland) bool {
	return course.StaffMayReach(c, ul)
}

// warmEnvOf is ul as the warm-up of a session whose warm-up began at
// warmupStart sees it, with dep its Deployment (nil when none), and when
// it last stopped (its creation, or its last idle stop): a start stamped
// before that wakes nothing.
func warmEnvOf(ul *v1alpha1.Userland, dep *appsv1.Deployment, warmupStart time.Time) (warmEnv, time.Time) {
	e := warmEnv{
		name:      ul.Name,
		running:   dep != nil && dep.Spec.Replicas != nil && *dep.Spec.Replicas > 0,
		queued:    ul.Status.StoppedReason == v1alpha1.StoppedQueued,
		suspended: ul.Spec.Suspend,
	}
	if t := ul.Status.LastActivityTime; t != nil {
		e.lastUsed = t.Time
	}
	since := ul.CreationTimestamp.Time
	if dep != nil {
		if stopped := parseTime(dep.Annotations[AnnotationIdleStoppedAt]); stopped != nil && stopped.After(since) {
			since = *stopped
		}
	}
	if asked := course.LastAsked(ul); asked != nil {
		e.asked = !asked.Before(warmupStart)
		// Asked for since it last stopped, whether before the warm-up
		// began or not: its start is on its way (the Userland reconciler
		// may be behind at class time). Stamping it again would change
		// its pod's restarted-at and restart a pod just started.
		e.starting = !e.running && !e.queued && !e.suspended && !asked.Before(since)
	}
	return e, since
}

// warm starts the environments decideWarm picks for session, the way the
// dashboard's Restart does: the restarted-at stamp, which counts as its
// user asking, so the Userland reconciler wakes it under the same idle
// rules and running limit as any start. The stamp is the latest of the
// warm-up's start, the environment's creation and its last stop (a start
// asked before the stop would not wake it), not the time now: a reconcile
// that repeats the patch from the same stale cache then changes nothing,
// so it can never restart an environment already started.
func (r *CourseReconciler) warm(ctx context.Context, s *courseState, session *timetable.Session) error {
	envs := make([]warmEnv, 0, len(s.userlands))
	byName := map[string]*v1alpha1.Userland{}
	stoppedSince := map[string]time.Time{}
	for i := range s.userlands {
		ul := &s.userlands[i]
		// The running limit (UserlandReconciler.admit) counts every
		// environment of the course's students; the warm-up counts the
		// same, or it stamps one the limit then queues, backdated ahead
		// of students who ask in person.
		other := !isStudentEnv(s.c, ul)
		if other && course.RoleOf(s.c, ul) != course.Student {
			continue
		}
		var dep appsv1.Deployment
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(ul), &dep)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("getting deployment %s/%s: %w", ul.Namespace, ul.Name, err)
		}
		var found *appsv1.Deployment
		if err == nil {
			found = &dep
		}
		e, since := warmEnvOf(ul, found, session.WarmupStart)
		e.other = other
		envs = append(envs, e)
		byName[ul.Name] = ul
		stoppedSince[ul.Name] = since
	}
	percent := int32(100)
	if p := s.c.Spec.Schedule.WarmPercent; p != nil {
		percent = *p
	}
	for _, name := range decideWarm(envs, percent, s.c.Spec.Limits.MaxRunning) {
		ul := byName[name]
		stamp := session.WarmupStart
		if since := stoppedSince[name]; since.After(stamp) {
			stamp = since
		}
		patch, err := actions.Patch(actions.Restart, actions.Staff, ul, stamp)
		if err != nil {
			return err
		}
		// A merge patch of one annotation, as the dashboard sends; ul is
		// the cache's, so the patch goes to a copy.
		err = r.Client.Patch(ctx, ul.DeepCopy(), patch, client.FieldOwner(FieldOwner))
		if actions.PassOver(err) {
			// Gone, or its name now holds another Userland: the cache
			// shows that soon and the next pass decides on it afresh.
			// One stale entry must not hold up the rest of the class.
			ctrl.LoggerFrom(ctx).V(1).Info("warm-up passed over an environment gone or replaced since the cache showed it",
				"userland", client.ObjectKeyFromObject(ul), "uid", ul.UID, "reason", err.Error())
			continue
		}
		if err != nil {
			return fmt.Errorf("warming %s/%s: %w", ul.Namespace, ul.Name, err)
		}
		r.Recorder.Eventf(s.c, ul, corev1.EventTypeNormal, "Warmed", "Start",
			"started %s's environment %s for the session at %s", ul.Spec.User, ul.Name, session.Start.Format(time.RFC3339))
	}
	return nil
}
