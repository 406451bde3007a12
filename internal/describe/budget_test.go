package describe_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/describe"
)

func TestBudgetWords(t *testing.T) {
	reset := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	exhausted := func(labels map[string]string, end *metav1.Time) *v1alpha1.Userland {
		return &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Status: v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseStopped, StoppedReason: v1alpha1.StoppedBudgetExhausted,
				Usage: &v1alpha1.UsageStatus{PeriodEnd: end, LimitSeconds: 3600, UsedSeconds: 3600}}}
	}
	cases := map[string]struct {
		ul       *v1alpha1.Userland
		ofCourse bool
		want     []string
	}{
		"a course student, weekly": {exhausted(map[string]string{v1alpha1.LabelCourse: "db"}, &metav1.Time{Time: reset}), true,
			[]string{"budget for this course (all your environments of it together) is used up", "resets on Monday 30 November 2026 at 00:00 UTC", "course's staff", "files were kept"}},
		"a term budget": {exhausted(map[string]string{v1alpha1.LabelCourse: "db"}, nil), true,
			[]string{"does not reset before the course's term ends", "course's staff"}},
		"outside a course": {exhausted(nil, &metav1.Time{Time: reset}), false, []string{"budget for this environment is used up", "ask an administrator"}},
		"a deleted course's label, its template's budget": {exhausted(map[string]string{v1alpha1.LabelCourse: "gone"}, &metav1.Time{Time: reset}), false,
			[]string{"budget for this environment is used up", "ask an administrator"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := describe.BudgetHold(tc.ul, tc.ofCourse)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("BudgetHold = %q, want it to say %q", got, w)
				}
			}
		})
	}
	if got := describe.BudgetHold(&v1alpha1.Userland{Status: v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseStopped, StoppedReason: v1alpha1.StoppedIdle}}, true); got != "" {
		t.Errorf("BudgetHold of an idle environment = %q, want none", got)
	}
	if d := describe.Environment(exhausted(nil, &metav1.Time{Time: reset})); d.Phase != "BudgetExhausted" || d.Running {
		t.Errorf("Environment of an exhausted one = %+v, want the phase BudgetExhausted, not running", d)
	}
	u := &v1alpha1.UsageStatus{UsedSeconds: 5400, LimitSeconds: 36000, GrantedSeconds: 3600, PeriodEnd: &metav1.Time{Time: reset}}
	if got, want := describe.Usage(u, nil, reset.Add(-time.Hour)), "1h30m used of 11h, 9h30m left"; got != want {
		t.Errorf("Usage = %q, want %q", got, want)
	}
	// The same student's database of the course: its use and its grant
	// are the student's too.
	db := &v1alpha1.UsageStatus{UsedSeconds: 1800, LimitSeconds: 36000, GrantedSeconds: 1800, PeriodEnd: &metav1.Time{Time: reset}}
	if got, want := describe.Usage(u, []*v1alpha1.UsageStatus{db}, reset.Add(-time.Hour)), "2h used of 11h30m, 9h30m left"; got != want {
		t.Errorf("Usage with the student's other environment = %q, want %q", got, want)
	}
}
