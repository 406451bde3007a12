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

// Progress is what the gateway's progress page tells someone who opened
// an environment that is not Ready.
type Progress struct {
	// Phase is shown while a start is awaited: Starting for one new or
	// stopped, since opening it starts it; else its phase.
	Phase string
	// Message is why it failed, why it was stopped, their place in line,
	// or the controller's word on the start; "" when there is nothing to
	// say.
	Message string
	// Hold is why its course keeps it stopped whatever its user does, ""
	// when none does. Opening it then wakes nothing: the page says this
	// and waits for nothing.
	Hold string
	// HeldPhase is shown when nothing will start it (a suspension, a
	// course's hold): the phase it has, not Starting.
	HeldPhase string
	// Failed is whether it failed: the page says so as an alert, and
	// keeps checking in case it recovers.
	Failed bool
}

func progress(ul *v1alpha1.Userland, now time.Time) Progress {
	held := cmp.Or(string(ul.Status.Phase), string(v1alpha1.PhaseStarting))
	p := Progress{Phase: held, HeldPhase: held, Message: waiting(ul, now), Hold: courseHold(ul), Failed: ul.Status.Phase == v1alpha1.PhaseFailed}
	if ul.Status.Phase == v1alpha1.PhaseStopped {
		// Opening it has woken it, or it is in line to be.
		p.Phase = string(v1alpha1.PhaseStarting)
	}
	return p
}

// waiting is Progress.Message at now.
func waiting(ul *v1alpha1.Userland, now time.Time) string {
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

// courseHold is Progress.Hold, in plain words for the student, with the
// controller's detail (the term's dates) in brackets.
func courseHold(ul *v1alpha1.Userland) string {
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
