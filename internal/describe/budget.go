package describe

import (
	"fmt"
	"time"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
)

// BudgetStop is the controller's Ready message for an environment stopped
// because its budget is used up. It names no "now", so it stays the same
// from one reconcile to the next and costs no write.
func BudgetStop(u *v1alpha1.UsageStatus) string {
	if at := budget.ResetAt(u); !at.IsZero() {
		return "the compute-hour budget is used up; it resets at " + at.UTC().Format(time.RFC3339)
	}
	return "the compute-hour budget for the term is used up"
}

// HeldByBudget reports whether ul is stopped because its budget is used
// up, so that it does not start until the budget resets or grows.
func HeldByBudget(ul *v1alpha1.Userland) bool {
	return ul.Status.Phase == v1alpha1.PhaseStopped && ul.Status.StoppedReason == v1alpha1.StoppedBudgetExhausted
}

// BudgetHold is why ul's budget keeps it stopped, in plain words for its
// user: when it resets and whom to ask for more; "" when it does not.
// ofCourse says the budget is its course's (budgetsource, as the
// controller decides), not its template's: a course's label alone does
// not send a student to staff who cannot grant it.
func BudgetHold(ul *v1alpha1.Userland, ofCourse bool) string {
	if !HeldByBudget(ul) {
		return ""
	}
	ask := "an administrator"
	if ofCourse {
		ask = "your course's staff (instructor or teaching assistant)"
	}
	when := "It does not reset before the course's term ends."
	if at := budget.ResetAt(ul.Status.Usage); !at.IsZero() {
		when = "It resets on " + at.UTC().Format("Monday 2 January 2006 at 15:04 MST") + "."
	}
	what := "this environment"
	if ofCourse {
		what = "this course (all your environments of it together)"
	}
	return fmt.Sprintf("Your compute-hour budget for %s is used up. %s To keep working before then, ask %s to grant you more hours. Your files were kept.", what, when, ask)
}

// Usage is a budget's use at now in plain words, such as "1h30m used of
// 10h, 8h30m left", or "" without a budget: u's, together with others',
// the environments sharing its budget (course.BudgetSharing).
func Usage(u *v1alpha1.UsageStatus, others []*v1alpha1.UsageStatus, now time.Time) string {
	if u == nil {
		return ""
	}
	p := budget.Pool(u, others, now)
	return fmt.Sprintf("%s used of %s, %s left", Hours(p.Used), Hours(p.Limit), Hours(max(0, p.Remaining)))
}

// Hours is seconds as hours and minutes: "1h30m", "45m", "10h".
func Hours(seconds int64) string {
	m := seconds / 60
	switch h := m / 60; {
	case h == 0:
		return fmt.Sprintf("%dm", m)
	case m%60 == 0:
		return fmt.Sprintf("%dh", h)
	default:
		return fmt.Sprintf("%dh%02dm", h, m%60)
	}
}
