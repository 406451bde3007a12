// Package timetable reads a course's schedule: which session is on or
// next at an instant, whether its warm-up has begun, and the exact instant
// anything of that changes, so a reconciler wakes at the deadline instead
// of polling. It is pure: time is passed in, nothing is read or written.
package timetable

import (
	"errors"
	"fmt"
	"time"
	_ "time/tzdata" // the webhook and the controller know the same zones, whatever the image holds

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// DefaultWarmup is how long before a session its environments are warmed
// when the schedule does not say (the API server defaults it too; this is
// for objects that skipped defaulting, such as the plugin's import).
const DefaultWarmup = 10 * time.Minute

// Session is one occurrence of a session, in UTC.
type Session struct {
	// WarmupStart is when its environments begin to be started: Start
	// less the schedule's warmup.
	WarmupStart time.Time
	Start, End  time.Time
}

// Result is what a schedule says at an instant.
type Result struct {
	// Next is the session in progress, or else the next one; nil when no
	// session is left within the window. Of sessions that overlap, the
	// one that began first.
	Next *Session
	// Warming is the session whose warm-up is on (WarmupStart <= now <
	// Start), nil when none. It can differ from Next when a session
	// begins right after another: its warm-up runs during the first.
	Warming *Session
	// Recheck is the first instant after now at which Next or Warming
	// changes (a warm-up begins, a session starts or ends); zero when
	// none will.
	Recheck time.Time
}

// Warm reports whether Next's warm-up has begun: its environments are
// being, or have been, warmed for it.
func (r Result) Warm(now time.Time) bool {
	return r.Next != nil && !now.Before(r.Next.WarmupStart)
}

// Window bounds the sessions that count: those starting at or after From
// and before Until (a course's term). A zero bound is open.
type Window struct{ From, Until time.Time }

// At reads sched at now within w. An error means a session the schema and
// the webhook should have refused (see Validate); the other sessions are
// still read.
func At(sched *v1alpha1.CourseSchedule, w Window, now time.Time) (Result, error) {
	var res Result
	if sched == nil {
		return res, nil
	}
	warmup := Warmup(sched)
	skip := make(map[string]bool, len(sched.Exceptions))
	for _, d := range sched.Exceptions {
		skip[d] = true
	}
	var errs []error
	for i := range sched.Sessions {
		s, err := firstAfter(&sched.Sessions[i], skip, w, now, len(sched.Exceptions))
		if err != nil {
			errs = append(errs, fmt.Errorf("sessions[%d]: %w", i, err))
			continue
		}
		if s == nil {
			continue
		}
		s.WarmupStart = s.Start.Add(-warmup)
		if res.Next == nil || earlier(s, res.Next) {
			res.Next = s
		}
		if !now.Before(s.WarmupStart) && now.Before(s.Start) && (res.Warming == nil || earlier(s, res.Warming)) {
			res.Warming = s
		}
		for _, at := range []time.Time{s.WarmupStart, s.Start, s.End} {
			if at.After(now) && (res.Recheck.IsZero() || at.Before(res.Recheck)) {
				res.Recheck = at
			}
		}
	}
	return res, errors.Join(errs...)
}

// Warmup is the schedule's warmup, or the default.
func Warmup(sched *v1alpha1.CourseSchedule) time.Duration {
	if sched.Warmup == nil {
		return DefaultWarmup
	}
	return max(0, sched.Warmup.Duration)
}

func earlier(a, b *Session) bool {
	return a.Start.Before(b.Start) || a.Start.Equal(b.Start) && a.End.Before(b.End)
}

// firstAfter is s's first occurrence within w that ends after now and
// falls on no exception date, nil when none. A weekly session is looked
// for week by week from the later of now and w.From: each exception can
// skip at most one week, so exceptions+1 weeks always find it.
func firstAfter(s *v1alpha1.CourseSession, skip map[string]bool, w Window, now time.Time, exceptions int) (*Session, error) {
	p, err := parse(s)
	if err != nil {
		return nil, err
	}
	if s.Date != nil {
		occ := p.on(p.date)
		if skip[p.date.Format(time.DateOnly)] || !occ.End.After(now) || !w.holds(occ.Start) {
			return nil, nil
		}
		return occ, nil
	}
	from := now
	if w.From.After(from) {
		from = w.From
	}
	// The local day from starts on, then forward to the session's day.
	y, m, d := from.In(p.loc).Date()
	day := time.Date(y, m, d, 12, 0, 0, 0, p.loc)
	day = day.AddDate(0, 0, (int(p.weekday)-int(day.Weekday())+7)%7)
	for range exceptions + 2 {
		occ := p.on(day)
		if !w.Until.IsZero() && !occ.Start.Before(w.Until) {
			return nil, nil
		}
		if !skip[day.Format(time.DateOnly)] && occ.End.After(now) && w.holds(occ.Start) {
			return occ, nil
		}
		day = day.AddDate(0, 0, 7)
	}
	return nil, nil
}

func (w Window) holds(t time.Time) bool {
	return (w.From.IsZero() || !t.Before(w.From)) && (w.Until.IsZero() || t.Before(w.Until))
}

// parsed is a session with its zone and times read.
type parsed struct {
	loc        *time.Location
	weekday    time.Weekday
	date       time.Time // noon of the date, in loc, for a dated session
	start, end time.Duration
}

// on is the occurrence on day's date: local wall-clock times, so a weekly
// 09:00 stays 09:00 across a daylight-saving change. A time the change
// skips (02:30 on the spring-forward night) is moved on by the gap, as
// time.Date does. A session that lies in the gap (02:30-03:00 that night)
// would then end before it starts: it ends as it starts instead, so it is
// still warmed, and no status shows an end before a start.
func (p parsed) on(day time.Time) *Session {
	y, m, d := day.Date()
	at := func(t time.Duration) time.Time {
		return time.Date(y, m, d, int(t/time.Hour), int(t%time.Hour/time.Minute), 0, 0, p.loc).UTC()
	}
	start, end := at(p.start), at(p.end)
	if end.Before(start) {
		end = start
	}
	return &Session{Start: start, End: end}
}

var weekdays = map[v1alpha1.Weekday]time.Weekday{
	"Sunday": time.Sunday, "Monday": time.Monday, "Tuesday": time.Tuesday, "Wednesday": time.Wednesday,
	"Thursday": time.Thursday, "Friday": time.Friday, "Saturday": time.Saturday,
}

func parse(s *v1alpha1.CourseSession) (parsed, error) {
	var p parsed
	var err error
	if p.loc, err = LoadZone(s.TimeZone); err != nil {
		return p, err
	}
	if p.start, err = clock(s.Start); err != nil {
		return p, fmt.Errorf("start: %w", err)
	}
	if p.end, err = clock(s.End); err != nil {
		return p, fmt.Errorf("end: %w", err)
	}
	if p.end <= p.start {
		return p, errors.New("end must be after start")
	}
	switch {
	case (s.Day == nil) == (s.Date == nil):
		return p, errors.New("exactly one of day or date must be set")
	case s.Date != nil:
		d, err := time.ParseInLocation(time.DateOnly, *s.Date, p.loc)
		if err != nil {
			return p, fmt.Errorf("date: %w", err)
		}
		p.date = d.Add(12 * time.Hour)
	default:
		var ok bool
		if p.weekday, ok = weekdays[*s.Day]; !ok {
			return p, fmt.Errorf("day %q is not a day of the week", *s.Day)
		}
	}
	return p, nil
}

// LoadZone loads an IANA zone by name. "Local" and "" are refused: the
// machine's zone is nothing a course can rely on.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("%q is not an IANA time zone name", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown IANA time zone %q", name)
	}
	return loc, nil
}

// clock reads HH:MM as the time since midnight.
func clock(s string) (time.Duration, error) {
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != 5 {
		return 0, fmt.Errorf("%q is not a time HH:MM", s)
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

// Validate checks what the schema cannot: every zone is one this binary
// knows. It checks the rest as well, so a caller that skips the API
// server (the plugin's import) gets the same answer.
func Validate(sched *v1alpha1.CourseSchedule, path *field.Path) field.ErrorList {
	if sched == nil {
		return nil
	}
	var errs field.ErrorList
	for i := range sched.Sessions {
		s := &sched.Sessions[i]
		p := path.Child("sessions").Index(i)
		if _, err := LoadZone(s.TimeZone); err != nil {
			errs = append(errs, field.Invalid(p.Child("timeZone"), s.TimeZone, err.Error()))
		}
		start, err1 := clock(s.Start)
		if err1 != nil {
			errs = append(errs, field.Invalid(p.Child("start"), s.Start, "must be a time HH:MM"))
		}
		end, err2 := clock(s.End)
		switch {
		case err2 != nil:
			errs = append(errs, field.Invalid(p.Child("end"), s.End, "must be a time HH:MM"))
		case err1 == nil && end <= start:
			errs = append(errs, field.Invalid(p.Child("end"), s.End, "must be after start"))
		}
		if (s.Day == nil) == (s.Date == nil) {
			errs = append(errs, field.Invalid(p, "", "exactly one of day (weekly) or date (once) must be set"))
		}
		if s.Date != nil {
			if _, err := time.Parse(time.DateOnly, *s.Date); err != nil {
				errs = append(errs, field.Invalid(p.Child("date"), *s.Date, "must be a date YYYY-MM-DD"))
			}
		}
	}
	for i, d := range sched.Exceptions {
		if _, err := time.Parse(time.DateOnly, d); err != nil {
			errs = append(errs, field.Invalid(path.Child("exceptions").Index(i), d, "must be a date YYYY-MM-DD"))
		}
	}
	return errs
}
