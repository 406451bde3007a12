package controller

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/course"
)

// RunInput is everything "should this environment run now?" depends on.
type RunInput struct {
	// Now is the controller clock's time.
	Now time.Time
	// Userland is the environment (read, never written): its suspend,
	// creation, last activity and start or restart request.
	Userland *v1alpha1.Userland
	// Idle is its template's idle policy; nil means never stop.
	Idle *v1alpha1.IdleSpec
	// Course is the course that made it, nil when none; Role is its
	// user's role there.
	Course *v1alpha1.Course
	Role   course.Role
	// NotAllowed is true when its template no longer allows the
	// namespace: it stops, not idle-stopped, so it starts again at once
	// once allowed.
	NotAllowed bool
	// Deployment is its Deployment from the cache, nil when none: whether
	// it runs, and the controller's bookkeeping annotations (when it
	// started, when it stopped for idleness).
	Deployment *appsv1.Deployment
	// Admit is asked, only for a student of a course with a running
	// limit who would start now, for their place in the course's queue
	// (0: admitted). It is the one part that looks at other environments.
	Admit func(maxRunning int, since time.Time) (int, error)
	// Budget is the compute-hour budget that governs it now, nil when
	// none does (budgetOf).
	Budget *budget.Budget
	// SharedWith is the usage of the student's other environments of
	// the course, which draw on the same budget (budgetSharers).
	SharedWith []*v1alpha1.UsageStatus

	// usage is the usage decideRun starts from: status.usage, with a run
	// the Deployment shows but status missed counted (usageAsRun).
	usage *v1alpha1.UsageStatus
}

// RunDecision is the answer: whether it runs, why not, and what the
// Deployment, the status and the queue must say about it.
type RunDecision struct {
	Running bool
	// WasRunning is whether the Deployment had a replica.
	WasRunning bool
	// StopReason is why it does not run (status.stoppedReason); empty
	// when it runs, or when it stops because the namespace is not
	// allowed (Ready says so).
	StopReason v1alpha1.StoppedReason
	// QueuePosition is its place in its course's queue, 0 when not
	// queued.
	QueuePosition int32
	// WarnStopAt is an idle stop near enough to warn of
	// (status.idleStopTime); nil when none.
	WarnStopAt *time.Time
	// Annotations are the Deployment's bookkeeping: startedAt while
	// running, idleStoppedAt while stopped for idleness (or by its
	// course, so that it starts when next asked).
	Annotations map[string]string
	// RequeueAfter is the time to the next deadline: an idle warning or
	// stop, a course's term change. Zero when none.
	RequeueAfter time.Duration
	// AskedSince is when its user asked for it (course.AskedSince).
	AskedSince time.Time
	// LastActive is the later of its start and the last time its user
	// asked: what the rollout policy calls in use.
	LastActive time.Time
	// IdleStopped and Woken are true when it stops for idleness now, or
	// starts again on activity after an idle stop: events to record.
	IdleStopped, Woken bool
	// BudgetExhausted is true when it stops now because its budget ran
	// out: an event to record.
	BudgetExhausted bool
	// Usage is its status.usage from now on, nil when no budget governs
	// it; equal to what it had unless it starts, stops, rolls over or its
	// budget changed.
	Usage *v1alpha1.UsageStatus
}

// decideRun decides whether the environment runs: the namespace's access,
// suspend, the idle rules, then its course's term, roster and running
// limit. Its only call out is in.Admit.
func decideRun(in RunInput) (RunDecision, error) {
	d := RunDecision{Annotations: map[string]string{}, AskedSince: course.AskedSince(in.Userland)}
	var startedAt, idleStoppedAt *time.Time
	if in.Deployment != nil {
		d.WasRunning = in.Deployment.Spec.Replicas != nil && *in.Deployment.Spec.Replicas > 0
		startedAt = parseTime(in.Deployment.Annotations[AnnotationStartedAt])
		idleStoppedAt = parseTime(in.Deployment.Annotations[AnnotationIdleStoppedAt])
	}
	in.usage = usageAsRun(in.Userland.Status.Usage, in.Budget, d.WasRunning, startedAt)
	asked := course.LastAsked(in.Userland)
	if in.Course != nil && startedAt == nil && idleStoppedAt == nil && asked == nil {
		// A course's environments are made ahead of use (a whole roster
		// at once); each starts when its student first opens it, as if
		// it had been stopped for idleness when it was made.
		created := in.Userland.CreationTimestamp.Time
		idleStoppedAt = &created
	}

	switch {
	case in.NotAllowed:
	case in.Userland.Spec.Suspend:
		d.StopReason = v1alpha1.StoppedSuspended
	default:
		decideIdle(&d, in, startedAt, idleStoppedAt, asked)
		decideBudget(&d, in, idleStoppedAt)
	}
	if in.Course != nil && !in.Userland.Spec.Suspend {
		if err := decideCourse(&d, in, idleStoppedAt); err != nil {
			return RunDecision{}, err
		}
	}

	d.LastActive = in.Now
	if startedAt != nil {
		d.LastActive = *startedAt
	}
	if asked != nil && asked.After(d.LastActive) {
		d.LastActive = *asked
	}
	if d.Running {
		started := in.Now
		if d.WasRunning && startedAt != nil {
			started = *startedAt
		}
		d.Annotations[AnnotationStartedAt] = stamp(started)
	}
	settleUsage(&d, in)
	return d, nil
}

// decideIdle applies the idle rules (DecideIdle) to an environment nothing
// else stops.
func decideIdle(d *RunDecision, in RunInput, startedAt, idleStoppedAt, asked *time.Time) {
	idle := IdleInput{Now: in.Now, LastActivity: asked, IdleStoppedAt: idleStoppedAt, StartedAt: in.Now}
	if startedAt != nil {
		idle.StartedAt = *startedAt
	}
	if in.Idle != nil {
		idle.Timeout = &in.Idle.Timeout.Duration
		idle.WarnBefore = WarnBefore(in.Idle)
	}
	i := DecideIdle(idle)
	d.Running, d.RequeueAfter, d.WarnStopAt = i.Running, i.RequeueAfter, i.StopAt
	switch {
	case i.Stop:
		d.Annotations[AnnotationIdleStoppedAt] = stamp(in.Now)
		d.IdleStopped = true
	case !i.Running:
		d.Annotations[AnnotationIdleStoppedAt] = stamp(*idleStoppedAt)
	case i.Wake:
		d.Woken = true
	}
	if !d.Running {
		d.StopReason = v1alpha1.StoppedIdle
		if in.Course != nil && asked == nil {
			// Made by its course ahead of use, and never asked for
			// since: it has not run, so it is not idle.
			d.StopReason = v1alpha1.StoppedNotStarted
		}
	}
}

// decideCourse applies the course's rules to an environment that is not
// suspended: outside the term, or off the roster, it may not run; a
// student's start waits for a place under the running limit. Stopped by
// its course, it stays stopped as if for idleness, so once the course
// allows it again it starts when its user next asks.
func decideCourse(d *RunDecision, in RunInput, idleStoppedAt *time.Time) error {
	d.RequeueAfter = soonest(d.RequeueAfter, course.NextChange(in.Course, in.Now))
	why := course.StudentStop(in.Course, in.Role, in.Now)
	if !d.Running {
		// Stopped anyway (idle, never opened): the course's reason,
		// when it has one, is what the user must be told.
		if why != "" {
			d.StopReason = why
		}
		return nil
	}
	if max := in.Course.Spec.Limits.MaxRunning; why == "" && in.Role == course.Student && max != nil && !d.WasRunning {
		// Running environments are never stopped for the limit: it
		// bounds starts, not work in progress.
		position, err := in.Admit(int(*max), d.AskedSince)
		if err != nil {
			return err
		}
		d.QueuePosition = int32(position)
		if position > 0 {
			why = v1alpha1.StoppedQueued
		}
	}
	if why == "" {
		return nil
	}
	// Not woken after all: an event saying so would be wrong.
	d.Running, d.StopReason, d.WarnStopAt, d.Woken = false, why, nil, false
	stoppedAt := in.Now
	if idleStoppedAt != nil && !d.WasRunning {
		stoppedAt = *idleStoppedAt
	}
	d.Annotations[AnnotationIdleStoppedAt] = stamp(stoppedAt)
	return nil
}

// soonest is the sooner of two waits, zero meaning none.
func soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// stamp is how the bookkeeping annotations store a time.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
