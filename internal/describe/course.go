package describe

import (
	"fmt"
	"time"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// CourseStop is the controller's Ready message for an environment of
// user that course c keeps stopped for reason (at place position in its
// queue). Describe shows it as the dashboard's message and, in brackets,
// in Progress.Hold, so it is worded for people, not for logs.
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
