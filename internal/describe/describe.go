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
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// Description is an environment's state as a person is told it.
type Description struct {
	// Title is what people call it (see Title).
	Title string
	// Phase is the phase the dashboard shows: Pending before the
	// controller's first word, and the course's reason (Queued,
	// BeforeTerm, TermEnded, Unenrolled) while a course holds it stopped.
	Phase string
	// Message says why, in plain words, beside Phase.
	Message string
	// Column is the kubectl plugin's PHASE column: the phase, with why it
	// is stopped ("Stopped (Idle)") or its place in line ("Stopped
	// (Queued, 3 in line)").
	Column string
	// Running is what the viewer may do: Stop when it has been asked to
	// run, Start when not. A queued environment has asked: Stop leaves the
	// line; Start would only move it back in line.
	Running bool
	// IdleStopAt is set while an idle stop is near and the environment
	// still runs, so a warning and "Keep running" make sense.
	IdleStopAt *time.Time
	// QueuePosition is its place in its course's queue (1 is next), set
	// while it is stopped as Queued; the course page orders its line by it.
	QueuePosition int32
	// Progress is what the progress page tells someone who opened it.
	Progress Progress
}

// Describe tells ul's state at now (the progress page says how long ago
// an idle environment was last used).
func Describe(ul *v1alpha1.Userland, now time.Time) Description {
	d := Description{
		Title:         Title(ul),
		Phase:         cmp.Or(string(ul.Status.Phase), string(v1alpha1.PhasePending)),
		Column:        column(ul),
		Running:       !ul.Spec.Suspend && (ul.Status.Phase != v1alpha1.PhaseStopped || ul.Status.StoppedReason == v1alpha1.StoppedQueued),
		QueuePosition: ul.Status.QueuePosition,
		Progress:      progress(ul, now),
	}
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
		case v1alpha1.StoppedQueued, v1alpha1.StoppedBeforeTerm, v1alpha1.StoppedTermEnded, v1alpha1.StoppedUnenrolled:
			// A course holds it: the reason is the phase shown, and the
			// controller's words (the place in line, the term's dates)
			// the message.
			d.Phase = string(ul.Status.StoppedReason)
		default:
			d.Message = "stopped"
		}
	}
	return d
}

// Title is what people call an environment: its template's display name
// (the controller copies it into status), else the template's name. The
// generated object name is never shown.
func Title(ul *v1alpha1.Userland) string {
	return cmp.Or(ul.Status.DisplayName, ul.Spec.TemplateRef.Name)
}

// column is Description.Column. kubectl users see the API's phase, so
// the course's reason stays in brackets rather than replacing it.
func column(ul *v1alpha1.Userland) string {
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
