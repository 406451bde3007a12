// Package describe is how an environment's state is told to a person: the
// dashboard's rows, the kubectl plugin's phase column, the gateway's
// progress page and the controller's words for a course that holds an
// environment. Each says it from this one place, so a state reads the
// same wherever it is seen.
//
// It is a leaf: it reads the API types only.
package describe

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// Title is what people call an environment: its template's display name
// (the controller copies it into status), else the template's name.
func Title(ul *v1alpha1.Userland) string {
	return cmp.Or(ul.Status.DisplayName, ul.Spec.TemplateRef.Name)
}

// Description is an environment's state as a person is told it.
type Description struct {
	// Phase is the phase shown: Pending before the controller's first
	// word, and the course's reason (Queued, BeforeTerm, TermEnded,
	// Unenrolled) while a course holds it stopped.
	Phase string
	// Message says why, in plain words.
	Message string
	// Running is whether it has been asked to run, so Stop is what the
	// viewer may do, not Start. A queued environment has asked: Stop
	// leaves the line; Start would only move it back in line.
	Running bool
	// IdleStopAt is set while an idle stop is near.
	IdleStopAt *time.Time
}

// Environment describes ul for its rows on the dashboard and the course
// page.
func Environment(ul *v1alpha1.Userland) Description {
	d := Description{Phase: cmp.Or(string(ul.Status.Phase), string(v1alpha1.PhasePending))}
	if ul.Status.IdleStopTime != nil && ul.Status.Phase != v1alpha1.PhaseStopped {
		t := ul.Status.IdleStopTime.Time
		d.IdleStopAt = &t
	}
	if c := meta.FindStatusCondition(ul.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		d.Message = c.Message
	}
	if ul.Status.Phase == v1alpha1.PhaseStopped {
		switch ul.Status.StoppedReason {
		case v1alpha1.StoppedIdle:
			d.Message = "stopped because nobody used it; opening it starts it again"
		case v1alpha1.StoppedNotStarted:
			d.Message = "not started yet; opening it starts it"
		case v1alpha1.StoppedQueued, v1alpha1.StoppedBeforeTerm, v1alpha1.StoppedTermEnded, v1alpha1.StoppedUnenrolled,
			v1alpha1.StoppedBudgetExhausted:
			// A course or a budget holds it: the reason is the phase
			// shown, and the controller's words (the place in line, the
			// term's dates, the budget's reset) the message.
			d.Phase = string(ul.Status.StoppedReason)
		default:
			d.Message = "stopped"
		}
	}
	d.Running = !ul.Spec.Suspend && (ul.Status.Phase != v1alpha1.PhaseStopped || ul.Status.StoppedReason == v1alpha1.StoppedQueued)
	return d
}

// Column is the kubectl plugin's PHASE column: the phase, with why it is
// stopped ("Stopped (Idle)") or its place in line ("Stopped (Queued, 3 in
// line)").
func Column(ul *v1alpha1.Userland) string {
	if ul.Status.Phase == "" {
		return string(v1alpha1.PhasePending)
	}
	if ul.Status.StoppedReason == v1alpha1.StoppedQueued && ul.Status.QueuePosition > 0 {
		return fmt.Sprintf("%s (Queued, %d in line)", ul.Status.Phase, ul.Status.QueuePosition)
	}
	if ul.Status.Phase == v1alpha1.PhaseStopped && ul.Status.StoppedReason != "" {
		return fmt.Sprintf("%s (%s)", ul.Status.Phase, ul.Status.StoppedReason)
	}
	return string(ul.Status.Phase)
}

// Waiting is what the progress page tells someone waiting for ul to
// start, at now: why it failed, why it was stopped, their place in line,
// or the controller's word on the start; "" when there is nothing to say.
func Waiting(ul *v1alpha1.Userland, now time.Time) string {
	var message string
	ready := meta.FindStatusCondition(ul.Status.Conditions, v1alpha1.ConditionReady)
	if ready != nil && ul.Status.Phase == v1alpha1.PhaseFailed {
		message = ready.Message
	}
	if ul.Status.Phase == v1alpha1.PhaseStopped && (ul.Status.StoppedReason == v1alpha1.StoppedIdle || ul.Status.StoppedReason == v1alpha1.StoppedNotStarted) {
		message = idleStopped(ul, now)
	}
	if ul.Status.StoppedReason == v1alpha1.StoppedQueued {
		message = queued(ul)
	}
	starting := ul.Status.Phase == "" || ul.Status.Phase == v1alpha1.PhaseStopped || ul.Status.Phase == v1alpha1.PhaseStarting
	if message == "" && starting && ready != nil && ready.Status != metav1.ConditionTrue {
		// The controller's own word on a start in progress.
		message = ready.Message
	}
	return message
}

// queued tells a student waiting for a place their place in line.
func queued(ul *v1alpha1.Userland) string {
	return fmt.Sprintf("Your course allows only so many environments running at once, and all are in use. "+
		"You are number %d in line; this page starts yours as soon as a place is free.", ul.Status.QueuePosition)
}

// idleStopped tells a user coming back why they wait.
func idleStopped(ul *v1alpha1.Userland, now time.Time) string {
	if ul.Status.LastActivityTime == nil && ul.Labels[v1alpha1.LabelCourse] != "" {
		// A course makes its environments ahead of their first use.
		return "It is starting for the first time."
	}
	since := ""
	if t := ul.Status.LastActivityTime; t != nil {
		since = " since " + now.Sub(t.Time).Round(time.Minute).String() + " ago"
		since = strings.Replace(since, "m0s", "m", 1)
	}
	return "It was stopped because nobody had used it" + since + ", to free the cluster for others. " +
		"It is starting again now; your files were kept."
}

// CourseHold is why a course keeps ul stopped whatever its user does, in
// plain words for them, or "" when no course does.
func CourseHold(ul *v1alpha1.Userland) string {
	if ul.Status.Phase != v1alpha1.PhaseStopped {
		return ""
	}
	detail := ""
	if c := meta.FindStatusCondition(ul.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		detail = " (" + c.Message + ")"
	}
	switch ul.Status.StoppedReason {
	case v1alpha1.StoppedBeforeTerm:
		return "Your course has not started yet" + detail + ". The environment can be started from then on."
	case v1alpha1.StoppedTermEnded:
		return "Your course has ended" + detail + ", so its environments are stopped. Ask your instructor if you need your files."
	case v1alpha1.StoppedUnenrolled:
		return "You are no longer on this course's roster, so its environment stays stopped. Ask your instructor if this is a mistake."
	}
	return ""
}

// CourseStop is the controller's Ready message for an environment of
// user that course c keeps stopped for reason (at place position in its
// queue).
func CourseStop(c *v1alpha1.Course, reason v1alpha1.StoppedReason, position int32, user string) string {
	switch reason {
	case v1alpha1.StoppedQueued:
		places := int32(0)
		if c.Spec.Limits.MaxRunning != nil {
			places = *c.Spec.Limits.MaxRunning
		}
		return fmt.Sprintf("waiting for one of the %d places of course %s: number %d in line", places, c.Name, position)
	case v1alpha1.StoppedBeforeTerm:
		return fmt.Sprintf("course %s starts at %s", c.Name, c.Spec.Term.Start.UTC().Format(time.RFC3339))
	case v1alpha1.StoppedTermEnded:
		return fmt.Sprintf("course %s ended at %s", c.Name, c.Spec.Term.End.UTC().Format(time.RFC3339))
	default:
		return fmt.Sprintf("%s is no longer on the roster of course %s", user, c.Name)
	}
}
