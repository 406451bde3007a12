package describe

import (
	"fmt"
	"time"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// Session is a course's next (or current) session as a person is told
// it: when, whether it has begun, how many environments are warm and on
// how many nodes the images are, e.g. "Mon 26 Nov 09:00–10:30 UTC, in
// 2h10m: 0 warm" or "… now: 12 warm, images on 3 of 3 nodes". "" when the
// course has no session left.
func Session(c *v1alpha1.Course, now time.Time) string {
	next := c.Status.NextSession
	if next == nil {
		return ""
	}
	start, end := next.Start.Time, next.End.Time
	when := fmt.Sprintf("%s–%s UTC", start.UTC().Format("Mon 2 Jan 15:04"), end.UTC().Format("15:04"))
	var state string
	switch {
	case now.Before(start):
		state = "in " + until(start.Sub(now))
	case now.Before(end):
		state = "now"
	default:
		state = "ended"
	}
	s := fmt.Sprintf("%s, %s: %d warm", when, state, next.Warm)
	if img := next.Images; img != nil {
		s += fmt.Sprintf(", images on %d of %d nodes", img.Ready, img.Desired)
	}
	return s
}

// until is a wait in words a timetable uses: "45m", "2h10m", "3 days".
func until(d time.Duration) string {
	d = d.Round(time.Minute)
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	switch {
	case h >= 48:
		return fmt.Sprintf("%d days", h/24)
	case h > 0:
		return fmt.Sprintf("%dh%02dm", h, m)
	default:
		return fmt.Sprintf("%dm", m)
	}
}
