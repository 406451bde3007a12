package describe

import (
	"testing"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// HeldByBudget is exactly the condition BudgetHold had: the budget-
// exhausted page shows for no other state, and for every held one.
func TestAdversaryToday2HeldByBudgetIsTheOldCondition(t *testing.T) {
	phases := []v1alpha1.Phase{"", v1alpha1.PhaseStopped, v1alpha1.PhaseReady, v1alpha1.PhaseStarting, v1alpha1.PhaseFailed}
	reasons := []v1alpha1.StoppedReason{"", v1alpha1.StoppedBudgetExhausted, v1alpha1.StoppedSuspended, v1alpha1.StoppedQueued, v1alpha1.StoppedIdle}
	for _, p := range phases {
		for _, r := range reasons {
			ul := &v1alpha1.Userland{}
			ul.Status.Phase, ul.Status.StoppedReason = p, r
			old := ul.Status.Phase == v1alpha1.PhaseStopped && ul.Status.StoppedReason == v1alpha1.StoppedBudgetExhausted
			for _, ofCourse := range []bool{false, true} {
				if got := BudgetHold(ul, ofCourse) != ""; got != old || HeldByBudget(ul) != old {
					t.Errorf("%s/%s ofCourse=%v: BudgetHold non-empty %v, HeldByBudget %v, old %v", p, r, ofCourse, got, HeldByBudget(ul), old)
				}
			}
		}
	}
}
