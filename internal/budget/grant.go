package budget

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxGrantHours bounds one period's grant: a typo of 1000 for 10 should
// not hand a student a year.
const MaxGrantHours = 1000

// MaxGrantedBy bounds the "granted by" part: status.usage.grantedBy holds
// at most this many characters, and a longer one would make every status
// write of the environment fail.
const MaxGrantedBy = 256

// Grant is one period's extra hours, as AnnotationBudgetGrant stores them.
type Grant struct {
	PeriodStart time.Time
	Hours       int64
	By          string
}

// ParseGrant reads "<periodStart RFC 3339>=<hours>[;<by>]".
func ParseGrant(s string) (Grant, error) {
	at, rest, ok := strings.Cut(s, "=")
	if !ok {
		return Grant{}, fmt.Errorf("grant %q: want <period start>=<hours>[;<granted by>]", s)
	}
	start, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return Grant{}, fmt.Errorf("grant %q: period start: %w", s, err)
	}
	n, by, _ := strings.Cut(rest, ";")
	hours, err := strconv.ParseInt(n, 10, 64)
	if err != nil || hours < 0 || hours > MaxGrantHours {
		return Grant{}, fmt.Errorf("grant %q: hours must be a whole number from 0 to %d", s, MaxGrantHours)
	}
	if len(by) > MaxGrantedBy {
		return Grant{}, fmt.Errorf("grant %q: who granted it may take at most %d characters", s, MaxGrantedBy)
	}
	return Grant{PeriodStart: start.UTC(), Hours: hours, By: by}, nil
}

// String is the annotation's value.
func (g Grant) String() string {
	s := g.PeriodStart.UTC().Format(time.RFC3339) + "=" + strconv.FormatInt(g.Hours, 10)
	if g.By != "" {
		s += ";" + g.By
	}
	return s
}

// GrantFor is the hours and granter an annotation grants for the period
// starting at periodStart: none when it is for another period or does
// not parse (the webhook refuses such values; an old one may linger).
func GrantFor(annotation string, periodStart time.Time) (int64, string) {
	if annotation == "" {
		return 0, ""
	}
	g, err := ParseGrant(annotation)
	if err != nil || !g.PeriodStart.Equal(periodStart) {
		return 0, ""
	}
	return g.Hours, g.By
}

// AddGrant is the annotation after granting hours more for the period
// starting at periodStart, on top of what current grants for it.
func AddGrant(current string, periodStart time.Time, hours int64, by string) (string, error) {
	had, _ := GrantFor(current, periodStart)
	total := had + hours
	if hours <= 0 || total > MaxGrantHours {
		return "", fmt.Errorf("granting %d hours: want a positive number, at most %d in a period", hours, MaxGrantHours)
	}
	for len(by) > MaxGrantedBy { // a long sign-in name, shortened whole runes at a time
		_, size := utf8.DecodeLastRuneInString(by)
		by = by[:len(by)-size]
	}
	return Grant{PeriodStart: periodStart, Hours: total, By: by}.String(), nil
}
