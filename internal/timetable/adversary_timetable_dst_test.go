package timetable_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/timetable"
)

// TestAdversaryTimetableSpringForwardGap: a session 02:30-03:00 in
// Europe/Berlin on the night clocks go from 02:00 to 03:00. Its start,
// which the change skips, moves on by the gap (03:30 CEST, 01:30Z), as
// documented; its end, 03:00 CEST (01:00Z), exists. An occurrence must
// never end before it starts: the status would show nextSession.end
// before nextSession.start, and the session would be dropped at its
// "end", before its warm-up began, so nothing would be warmed for it.
func TestAdversaryTimetableSpringForwardGap(t *testing.T) {
	cases := map[string]struct {
		session v1alpha1.CourseSession
		now     string
		want    timetable.Result
	}{
		"dated, wholly in the gap: kept, and warmed, ending as it starts": {
			session: dated("2027-03-28", "02:30", "03:00", "Europe/Berlin"), now: "2027-03-28T00:00:00Z",
			want: timetable.Result{Next: session("2027-03-28T01:30:00Z", "2027-03-28T01:30:00Z"), Recheck: utc("2027-03-28T01:20:00Z")},
		},
		"weekly, wholly in the gap, during its warm-up: warming": {
			session: weekly("Sunday", "02:30", "03:00", "Europe/Berlin"), now: "2027-03-28T01:25:00Z",
			want: timetable.Result{
				Next: session("2027-03-28T01:30:00Z", "2027-03-28T01:30:00Z"), Warming: session("2027-03-28T01:30:00Z", "2027-03-28T01:30:00Z"),
				Recheck: utc("2027-03-28T01:30:00Z"),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sched := &v1alpha1.CourseSchedule{Sessions: []v1alpha1.CourseSession{tc.session}}
			got, err := timetable.At(sched, timetable.Window{}, utc(tc.now))
			if err != nil {
				t.Fatal(err)
			}
			if got.Next != nil && got.Next.End.Before(got.Next.Start) {
				t.Errorf("the next session ends (%s) before it starts (%s)", got.Next.End, got.Next.Start)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
