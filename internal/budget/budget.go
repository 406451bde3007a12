// Package budget is the arithmetic of compute-hour budgets: which period
// an instant falls in, what an environment has used and has left, when a
// running one runs out, and how its usage moves at a start, a stop or a
// rollover. The controller persists what Advance returns; the gateway,
// the plugin and the metrics read usage with Used and Remaining, so a
// running environment costs no write to stay current.
package budget

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// Period is one budget period: from Start until End (zero End: no reset,
// a term budget).
type Period struct {
	Start, End time.Time
}

// WeekStart is the Monday 00:00 UTC at or before t: weekly budgets reset
// then, at one instant for every course.
func WeekStart(t time.Time) time.Time {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	back := (int(day.Weekday()) + 6) % 7 // days since Monday
	return day.AddDate(0, 0, -back)
}

// PeriodAt is the period of spec that holds now; termStart is the start of
// the course's term (a term budget counts from it).
func PeriodAt(spec v1alpha1.BudgetSpec, termStart, now time.Time) Period {
	if spec.Period == v1alpha1.BudgetTerm {
		return Period{Start: termStart.UTC()}
	}
	start := WeekStart(now)
	return Period{Start: start, End: start.AddDate(0, 0, 7)}
}

// Budget is what applies to one environment now.
type Budget struct {
	Period Period
	// LimitSeconds is the period's budget in weighted seconds.
	LimitSeconds int64
	// GrantedSeconds are extra weighted seconds staff granted for Period.
	GrantedSeconds int64
	// GrantedBy is who the grant annotation names.
	GrantedBy string
	// WeightMilli is what a second of running costs, in thousandths.
	WeightMilli int64
}

// For is the budget spec makes for an environment running pod at now.
func For(spec v1alpha1.BudgetSpec, termStart time.Time, pod *corev1.PodSpec, grant string, now time.Time) Budget {
	p := PeriodAt(spec, termStart, now)
	hours, by := GrantFor(grant, p.Start)
	weight := int64(1000)
	if spec.Weighting == v1alpha1.WeightingCPU {
		weight = MilliCPU(pod)
	}
	return Budget{Period: p, LimitSeconds: int64(spec.Hours) * 3600, GrantedSeconds: hours * 3600, GrantedBy: by, WeightMilli: weight}
}

// MilliCPU is the CPU a pod asks for: its containers' requests, each
// falling back to its limit; one CPU when none says. CPU-hours then mean
// what the scheduler set aside, not what the app happened to burn.
func MilliCPU(pod *corev1.PodSpec) int64 {
	var total int64
	if pod != nil {
		for _, c := range pod.Containers {
			if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
				total += q.MilliValue()
			} else if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
				total += q.MilliValue()
			}
		}
	}
	if total <= 0 {
		return 1000
	}
	return total
}

// Used is the weighted seconds u has used in its period at now: what was
// persisted plus the current run, computed on read. A period that has
// ended (not yet rolled over in status) counts only the run since its end.
func Used(u *v1alpha1.UsageStatus, now time.Time) int64 {
	if u == nil {
		return 0
	}
	used, since := u.UsedSeconds, u.RunningSince
	if u.PeriodEnd != nil && !now.Before(u.PeriodEnd.Time) {
		used = 0
		if since != nil {
			since = u.PeriodEnd
		}
	}
	if since != nil && now.After(since.Time) {
		used += int64(now.Sub(since.Time)/time.Second) * u.WeightMilli / 1000
	}
	return used
}

// Remaining is what u has left at now, grants included; it may be
// negative when a stop came late (the controller was down).
func Remaining(u *v1alpha1.UsageStatus, now time.Time) int64 {
	if u == nil {
		return 0
	}
	return limitAt(u, now) - Used(u, now) // a grant is for its own period
}

// ExhaustedAt is when a running u runs out, the zero time when it is not
// running: the controller requeues for exactly then instead of polling.
func ExhaustedAt(u *v1alpha1.UsageStatus) time.Time {
	if u == nil || u.RunningSince == nil || u.WeightMilli <= 0 {
		return time.Time{}
	}
	left := max(0, u.LimitSeconds+u.GrantedSeconds-u.UsedSeconds)
	// Rounded up, so at the deadline Used has reached the limit.
	secs := (left*1000 + u.WeightMilli - 1) / u.WeightMilli
	return u.RunningSince.Add(time.Duration(secs) * time.Second)
}

// ResetAt is when u's period ends and the budget starts afresh; the zero
// time for a term budget.
func ResetAt(u *v1alpha1.UsageStatus) time.Time {
	if u == nil || u.PeriodEnd == nil {
		return time.Time{}
	}
	return u.PeriodEnd.Time
}

// Advance is the usage to persist at now under b, given whether the
// environment runs from now on. It changes only at a start, a stop, a
// rollover, or a change of the budget or the weight, so an environment
// that keeps running (or stays stopped) in one period gets back what it
// had: no status write.
func Advance(prev *v1alpha1.UsageStatus, b Budget, now time.Time, running bool) *v1alpha1.UsageStatus {
	now = now.Truncate(time.Second) // as metav1.Time stores it
	next := &v1alpha1.UsageStatus{PeriodStart: metav1.NewTime(b.Period.Start)}
	if !b.Period.End.IsZero() {
		next.PeriodEnd = &metav1.Time{Time: b.Period.End}
	}
	wasRunning := false
	if prev != nil && prev.PeriodStart.Equal(&next.PeriodStart) {
		next.UsedSeconds, next.RunningSince, next.WeightMilli = prev.UsedSeconds, prev.RunningSince, prev.WeightMilli
		wasRunning = prev.RunningSince != nil
	} else if prev != nil && prev.RunningSince != nil {
		// Rolled over while running: the new period counts from its start.
		since := metav1.NewTime(maxTime(b.Period.Start, prev.RunningSince.Time))
		next.RunningSince, next.WeightMilli, wasRunning = &since, prev.WeightMilli, true
	}
	if wasRunning && (!running || next.WeightMilli != b.WeightMilli) {
		// Settle the run so far: a stop, or a new weight from now on.
		next.UsedSeconds = Used(next, now)
		next.RunningSince, next.WeightMilli = nil, 0
		wasRunning = false
	}
	if running && !wasRunning {
		next.RunningSince, next.WeightMilli = &metav1.Time{Time: now}, b.WeightMilli
	}
	next.LimitSeconds, next.GrantedSeconds, next.GrantedBy = b.LimitSeconds, b.GrantedSeconds, b.GrantedBy
	return next
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
