package budget

import (
	"time"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// A course's budget is each student's, not each environment's: a student
// with two of the course's templates (an editor and a database, say) has
// one budget for both. Each environment still persists its own usage
// (what it used, since when it runs, at what weight), so nothing is
// written for the others when one starts or stops; the student's figures
// are summed on read from the environments' statuses.

// Pooled is one student's budget at an instant, across the environments
// that share it.
type Pooled struct {
	// Used is what they have used in the period, all told.
	Used int64
	// Limit is the period's budget once, plus every grant of the period,
	// whichever environment it was recorded on.
	Limit int64
	// Remaining is Limit - Used; negative when a stop came late.
	Remaining int64
}

// Pool is what u and others (the same student's other environments that
// share its budget, course.SharesBudget) have used and have left at now.
// u's limit is the budget's: others carry the same one unless the course
// changed it since they were last reconciled. Another environment's grant
// counts only while its period is u's.
func Pool(u *v1alpha1.UsageStatus, others []*v1alpha1.UsageStatus, now time.Time) Pooled {
	if u == nil {
		return Pooled{}
	}
	p := Pooled{Used: Used(u, now), Limit: limitAt(u, now)}
	for _, o := range others {
		if o == nil {
			continue
		}
		p.Used += Used(o, now)
		if o.PeriodStart.Equal(&u.PeriodStart) && inPeriod(o, now) {
			p.Limit += o.GrantedSeconds
		}
	}
	p.Remaining = p.Limit - p.Used
	return p
}

// PoolExhaustedAt is when a running u runs out with others drawing on the
// same budget at their own weights; the zero time when u is not running.
// Unlike ExhaustedAt it depends on now: another environment starting or
// stopping moves the deadline, and the controller looks again then.
func PoolExhaustedAt(u *v1alpha1.UsageStatus, others []*v1alpha1.UsageStatus, now time.Time) time.Time {
	if u == nil || u.RunningSince == nil || u.WeightMilli <= 0 {
		return time.Time{}
	}
	if len(others) == 0 {
		return ExhaustedAt(u)
	}
	rate := u.WeightMilli
	for _, o := range others {
		if o != nil && o.RunningSince != nil && o.WeightMilli > 0 {
			rate += o.WeightMilli
		}
	}
	left := max(0, Pool(u, others, now).Remaining)
	// Rounded up, so at the deadline the pool is used up.
	secs := (left*1000 + rate - 1) / rate
	return now.Truncate(time.Second).Add(time.Duration(secs) * time.Second)
}

// limitAt is u's budget with its grant, while its period lasts; after
// it, the grant (for that period) no longer counts.
func limitAt(u *v1alpha1.UsageStatus, now time.Time) int64 {
	if !inPeriod(u, now) {
		return u.LimitSeconds
	}
	return u.LimitSeconds + u.GrantedSeconds
}

// inPeriod reports whether now is still in u's period.
func inPeriod(u *v1alpha1.UsageStatus, now time.Time) bool {
	return u.PeriodEnd == nil || now.Before(u.PeriodEnd.Time)
}
