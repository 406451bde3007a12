package main

import (
	"testing"
	"time"
)

// TestWarmSession: whatever the hour the bench runs, the session it adds
// starts lead after now on a whole minute, in a zone the time zone
// database knows, and ends later on the same local day.
func TestWarmSession(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 26, 0, 7, 30, 0, time.UTC)
	for h := range 24 {
		now := base.Add(time.Duration(h) * time.Hour)
		s := warmSession(now, 3*time.Minute, time.Hour)
		loc, err := time.LoadLocation(s.TimeZone)
		if err != nil {
			t.Fatalf("%s: zone %q: %v", now, s.TimeZone, err)
		}
		start, err := time.ParseInLocation("2006-01-02 15:04", *s.Date+" "+s.Start, loc)
		if err != nil {
			t.Fatal(err)
		}
		end, err := time.ParseInLocation("2006-01-02 15:04", *s.Date+" "+s.End, loc)
		if err != nil {
			t.Fatal(err)
		}
		if lead := start.Sub(now); lead < 3*time.Minute || lead > 4*time.Minute {
			t.Errorf("%s: session %+v (%s) starts %s after now, want 3–4 min", now, s, s.TimeZone, lead)
		}
		if got := end.Sub(start); got != time.Hour || s.End <= s.Start {
			t.Errorf("%s: session %s–%s on %s lasts %s or ends before it starts", now, s.Start, s.End, *s.Date, got)
		}
	}
}
