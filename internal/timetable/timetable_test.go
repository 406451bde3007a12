package timetable_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/timetable"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func weekly(day v1alpha1.Weekday, start, end, zone string) v1alpha1.CourseSession {
	return v1alpha1.CourseSession{Day: &day, Start: start, End: end, TimeZone: zone}
}

func dated(date, start, end, zone string) v1alpha1.CourseSession {
	return v1alpha1.CourseSession{Date: &date, Start: start, End: end, TimeZone: zone}
}

// session is an occurrence with the default 10-minute warm-up.
func session(start, end string) *timetable.Session {
	s := utc(start)
	return &timetable.Session{WarmupStart: s.Add(-10 * time.Minute), Start: s, End: utc(end)}
}

func TestAt(t *testing.T) {
	tokyo := weekly("Tuesday", "10:00", "11:30", "Asia/Tokyo") // 01:00Z-02:30Z, all year
	berlin := weekly("Monday", "09:00", "10:30", "Europe/Berlin")
	cases := map[string]struct {
		sessions   []v1alpha1.CourseSession
		exceptions []string
		warmup     *time.Duration
		window     timetable.Window
		now        string
		want       timetable.Result
	}{
		"Tokyo: the day before, next is Tuesday 10:00 JST; look again at its warm-up": {
			sessions: []v1alpha1.CourseSession{tokyo}, now: "2026-12-07T12:00:00Z",
			want: timetable.Result{Next: session("2026-12-08T01:00:00Z", "2026-12-08T02:30:00Z"), Recheck: utc("2026-12-08T00:50:00Z")},
		},
		"Tokyo: the warm-up's first instant": {
			sessions: []v1alpha1.CourseSession{tokyo}, now: "2026-12-08T00:50:00Z",
			want: timetable.Result{
				Next: session("2026-12-08T01:00:00Z", "2026-12-08T02:30:00Z"), Warming: session("2026-12-08T01:00:00Z", "2026-12-08T02:30:00Z"),
				Recheck: utc("2026-12-08T01:00:00Z"),
			},
		},
		"Tokyo: in session, no warm-up; look again at its end": {
			sessions: []v1alpha1.CourseSession{tokyo}, now: "2026-12-08T01:00:00Z",
			want: timetable.Result{Next: session("2026-12-08T01:00:00Z", "2026-12-08T02:30:00Z"), Recheck: utc("2026-12-08T02:30:00Z")},
		},
		"Tokyo: at its end, next week's": {
			sessions: []v1alpha1.CourseSession{tokyo}, now: "2026-12-08T02:30:00Z",
			want: timetable.Result{Next: session("2026-12-15T01:00:00Z", "2026-12-15T02:30:00Z"), Recheck: utc("2026-12-15T00:50:00Z")},
		},
		"Tokyo: has no daylight saving, so summer is the same UTC time": {
			sessions: []v1alpha1.CourseSession{tokyo}, now: "2027-07-05T00:00:00Z",
			want: timetable.Result{Next: session("2027-07-06T01:00:00Z", "2027-07-06T02:30:00Z"), Recheck: utc("2027-07-06T00:50:00Z")},
		},
		"Tokyo: a holiday skips that Tuesday": {
			sessions: []v1alpha1.CourseSession{tokyo}, exceptions: []string{"2026-12-08"}, now: "2026-12-08T00:55:00Z",
			want: timetable.Result{Next: session("2026-12-15T01:00:00Z", "2026-12-15T02:30:00Z"), Recheck: utc("2026-12-15T00:50:00Z")},
		},
		"Tokyo: three holidays in a row": {
			sessions: []v1alpha1.CourseSession{tokyo}, exceptions: []string{"2026-12-22", "2026-12-29", "2027-01-05"}, now: "2026-12-20T00:00:00Z",
			want: timetable.Result{Next: session("2027-01-12T01:00:00Z", "2027-01-12T02:30:00Z"), Recheck: utc("2027-01-12T00:50:00Z")},
		},
		"Berlin: the Monday before spring forward is 09:00 CET, 08:00Z": {
			sessions: []v1alpha1.CourseSession{berlin}, now: "2027-03-21T12:00:00Z",
			want: timetable.Result{Next: session("2027-03-22T08:00:00Z", "2027-03-22T09:30:00Z"), Recheck: utc("2027-03-22T07:50:00Z")},
		},
		"Berlin: the Monday after is 09:00 CEST, 07:00Z": {
			sessions: []v1alpha1.CourseSession{berlin}, now: "2027-03-22T09:30:00Z",
			want: timetable.Result{Next: session("2027-03-29T07:00:00Z", "2027-03-29T08:30:00Z"), Recheck: utc("2027-03-29T06:50:00Z")},
		},
		"Berlin: warming up on the Monday after": {
			sessions: []v1alpha1.CourseSession{berlin}, now: "2027-03-29T06:55:00Z",
			want: timetable.Result{
				Next: session("2027-03-29T07:00:00Z", "2027-03-29T08:30:00Z"), Warming: session("2027-03-29T07:00:00Z", "2027-03-29T08:30:00Z"),
				Recheck: utc("2027-03-29T07:00:00Z"),
			},
		},
		"Berlin: fall back, from 07:00Z to 08:00Z": {
			sessions: []v1alpha1.CourseSession{berlin}, now: "2026-10-19T08:30:00Z",
			want: timetable.Result{Next: session("2026-10-26T08:00:00Z", "2026-10-26T09:30:00Z"), Recheck: utc("2026-10-26T07:50:00Z")},
		},
		"Berlin: a Sunday session on the night of the change is 09:00 CEST": {
			sessions: []v1alpha1.CourseSession{weekly("Sunday", "09:00", "10:00", "Europe/Berlin")}, now: "2027-03-27T23:00:00Z",
			want: timetable.Result{Next: session("2027-03-28T07:00:00Z", "2027-03-28T08:00:00Z"), Recheck: utc("2027-03-28T06:50:00Z")},
		},
		"a dated session, once": {
			sessions: []v1alpha1.CourseSession{dated("2026-12-10", "14:00", "16:00", "Europe/Berlin")}, now: "2026-12-01T00:00:00Z",
			want: timetable.Result{Next: session("2026-12-10T13:00:00Z", "2026-12-10T15:00:00Z"), Recheck: utc("2026-12-10T12:50:00Z")},
		},
		"a dated session that is over": {
			sessions: []v1alpha1.CourseSession{dated("2026-12-10", "14:00", "16:00", "Europe/Berlin")}, now: "2026-12-10T15:00:00Z",
		},
		"a dated session on an exception date": {
			sessions: []v1alpha1.CourseSession{dated("2026-12-10", "14:00", "16:00", "Europe/Berlin")}, exceptions: []string{"2026-12-10"}, now: "2026-12-01T00:00:00Z",
		},
		"the earliest of several; a custom warm-up": {
			sessions: []v1alpha1.CourseSession{tokyo, dated("2026-12-09", "09:00", "10:00", "UTC")}, warmup: ptr.To(30 * time.Minute),
			now: "2026-12-08T00:40:00Z",
			want: timetable.Result{
				Next:    &timetable.Session{WarmupStart: utc("2026-12-08T00:30:00Z"), Start: utc("2026-12-08T01:00:00Z"), End: utc("2026-12-08T02:30:00Z")},
				Warming: &timetable.Session{WarmupStart: utc("2026-12-08T00:30:00Z"), Start: utc("2026-12-08T01:00:00Z"), End: utc("2026-12-08T02:30:00Z")},
				Recheck: utc("2026-12-08T01:00:00Z"),
			},
		},
		"back to back: the second warms up during the first": {
			sessions: []v1alpha1.CourseSession{weekly("Tuesday", "09:00", "10:00", "UTC"), weekly("Tuesday", "10:05", "11:00", "UTC")},
			now:      "2026-12-08T09:56:00Z",
			want: timetable.Result{
				Next: session("2026-12-08T09:00:00Z", "2026-12-08T10:00:00Z"), Warming: session("2026-12-08T10:05:00Z", "2026-12-08T11:00:00Z"),
				Recheck: utc("2026-12-08T10:00:00Z"),
			},
		},
		"nothing after the term": {
			sessions: []v1alpha1.CourseSession{tokyo}, window: timetable.Window{Until: utc("2026-12-08T01:00:00Z")}, now: "2026-12-07T00:00:00Z",
		},
		"nothing before the term: the first session is the term's first": {
			sessions: []v1alpha1.CourseSession{tokyo}, window: timetable.Window{From: utc("2027-04-01T00:00:00Z")}, now: "2026-12-07T00:00:00Z",
			want: timetable.Result{Next: session("2027-04-06T01:00:00Z", "2027-04-06T02:30:00Z"), Recheck: utc("2027-04-06T00:50:00Z")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sched := &v1alpha1.CourseSchedule{Sessions: tc.sessions, Exceptions: tc.exceptions}
			if tc.warmup != nil {
				sched.Warmup = &metav1.Duration{Duration: *tc.warmup}
			}
			got, err := timetable.At(sched, tc.window, utc(tc.now))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWarm(t *testing.T) {
	sched := &v1alpha1.CourseSchedule{Sessions: []v1alpha1.CourseSession{weekly("Tuesday", "10:00", "11:00", "UTC")}}
	for now, want := range map[string]bool{
		"2026-12-08T09:49:59Z": false, "2026-12-08T09:50:00Z": true, "2026-12-08T10:30:00Z": true, "2026-12-08T11:00:00Z": false,
	} {
		got, _ := timetable.At(sched, timetable.Window{}, utc(now))
		if got.Warm(utc(now)) != want {
			t.Errorf("Warm at %s = %v, want %v", now, !want, want)
		}
	}
}

func TestAtReadsTheOtherSessionsPastABadOne(t *testing.T) {
	sched := &v1alpha1.CourseSchedule{Sessions: []v1alpha1.CourseSession{
		weekly("Tuesday", "10:00", "11:00", "Mars/Olympus"), weekly("Tuesday", "10:00", "11:00", "UTC"),
	}}
	got, err := timetable.At(sched, timetable.Window{}, utc("2026-12-07T00:00:00Z"))
	if err == nil {
		t.Error("an unknown zone gave no error")
	}
	if diff := cmp.Diff(session("2026-12-08T10:00:00Z", "2026-12-08T11:00:00Z"), got.Next); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	path := field.NewPath("spec", "schedule")
	cases := map[string]struct {
		sched *v1alpha1.CourseSchedule
		want  []string
	}{
		"valid": {sched: &v1alpha1.CourseSchedule{
			Sessions:   []v1alpha1.CourseSession{weekly("Monday", "09:00", "10:30", "Europe/Berlin"), dated("2026-12-10", "14:00", "16:00", "Asia/Tokyo")},
			Exceptions: []string{"2026-12-24"},
		}},
		"unknown zone": {
			sched: &v1alpha1.CourseSchedule{Sessions: []v1alpha1.CourseSession{weekly("Monday", "09:00", "10:00", "Europe/Atlantis")}},
			want:  []string{`spec.schedule.sessions[0].timeZone: Invalid value: "Europe/Atlantis": unknown IANA time zone "Europe/Atlantis"`},
		},
		"the machine's zone": {
			sched: &v1alpha1.CourseSchedule{Sessions: []v1alpha1.CourseSession{weekly("Monday", "09:00", "10:00", "Local")}},
			want:  []string{`spec.schedule.sessions[0].timeZone: Invalid value: "Local": "Local" is not an IANA time zone name`},
		},
		"end before start, bad time, both day and date, bad exception": {
			sched: &v1alpha1.CourseSchedule{
				Sessions: []v1alpha1.CourseSession{
					weekly("Monday", "10:00", "09:00", "UTC"),
					{Day: ptr.To(v1alpha1.Weekday("Monday")), Date: ptr.To("2026-12-10"), Start: "9:00", End: "10:00", TimeZone: "UTC"},
				},
				Exceptions: []string{"24.12.2026"},
			},
			want: []string{
				`spec.schedule.sessions[0].end: Invalid value: "09:00": must be after start`,
				`spec.schedule.sessions[1].start: Invalid value: "9:00": must be a time HH:MM`,
				`spec.schedule.sessions[1]: Invalid value: "": exactly one of day (weekly) or date (once) must be set`,
				`spec.schedule.exceptions[0]: Invalid value: "24.12.2026": must be a date YYYY-MM-DD`,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, e := range timetable.Validate(tc.sched, path) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
