package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestDecideRunWithABudget: a budget stops a running environment at the
// instant it runs out, refuses a start once it has, says so as the stop
// reason, and requeues for the exhaustion or the reset, never a poll.
func TestDecideRunWithABudget(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 7, 10, 0, 0, 0, time.UTC) // a Wednesday
	week := budget.Period{Start: time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 10, 12, 0, 0, 0, 0, time.UTC)}
	twoHours := budget.Budget{Period: week, LimitSeconds: 7200, WeightMilli: 1000}
	mt := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	usage := func(used int64, runningSince *metav1.Time) *v1alpha1.UsageStatus {
		u := &v1alpha1.UsageStatus{PeriodStart: metav1.NewTime(week.Start), PeriodEnd: &metav1.Time{Time: week.End},
			UsedSeconds: used, LimitSeconds: 7200}
		if runningSince != nil {
			u.RunningSince, u.WeightMilli = runningSince, 1000
		}
		return u
	}
	env := func(u *v1alpha1.UsageStatus, activity time.Duration) *v1alpha1.Userland {
		ul := testobj.MakeUserland("ns", "alice", "alice", "lab").Obj()
		ul.CreationTimestamp = metav1.NewTime(now.Add(-72 * time.Hour))
		ul.Status.Usage = u
		ul.Status.LastActivityTime = mt(activity)
		return ul
	}
	running := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationStartedAt: stamp(now.Add(-time.Hour))}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1))}}
	idleStopped := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationIdleStoppedAt: stamp(now.Add(-2 * time.Hour))}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(0))}}
	inTerm := testobj.MakeCourse("ns", "cs101").Term(now.Add(-24*time.Hour), now.Add(30*24*time.Hour)).
		Students("alice").Template("lab", v1alpha1.ProvisionUpFront).Obj()
	ended := testobj.MakeCourse("ns", "cs101").Term(now.Add(-30*24*time.Hour), now.Add(-time.Hour)).
		Students("alice").Template("lab", v1alpha1.ProvisionUpFront).Obj()

	type outcome struct {
		Running         bool
		StopReason      v1alpha1.StoppedReason
		BudgetExhausted bool
		RequeueAfter    time.Duration
		Usage           *v1alpha1.UsageStatus
	}
	for _, tc := range []struct {
		name string
		in   RunInput
		want outcome
	}{{
		name: "running with an hour left: requeued for exactly when it runs out, no change to usage",
		in:   RunInput{Userland: env(usage(0, mt(-time.Hour)), -time.Minute), Deployment: running, Budget: &twoHours},
		want: outcome{Running: true, RequeueAfter: time.Hour, Usage: usage(0, mt(-time.Hour))},
	}, {
		name: "running and used up: stopped as BudgetExhausted, the run settled",
		in:   RunInput{Userland: env(usage(3600, mt(-time.Hour)), -time.Minute), Deployment: running, Budget: &twoHours},
		want: outcome{StopReason: v1alpha1.StoppedBudgetExhausted, BudgetExhausted: true,
			RequeueAfter: week.End.Sub(now), Usage: usage(7200, nil)},
	}, {
		name: "asked to start with nothing left: refused until the reset",
		in:   RunInput{Userland: env(usage(7200, nil), 0), Deployment: idleStopped, Budget: &twoHours},
		want: outcome{StopReason: v1alpha1.StoppedBudgetExhausted, RequeueAfter: week.End.Sub(now), Usage: usage(7200, nil)},
	}, {
		name: "idle with nothing left: the budget is the reason shown",
		in:   RunInput{Userland: env(usage(7200, nil), -3*time.Hour), Deployment: idleStopped, Budget: &twoHours},
		want: outcome{StopReason: v1alpha1.StoppedBudgetExhausted, RequeueAfter: week.End.Sub(now), Usage: usage(7200, nil)},
	}, {
		name: "a grant lets it start again",
		in: RunInput{Userland: env(usage(7200, nil), 0), Deployment: idleStopped,
			Budget: &budget.Budget{Period: week, LimitSeconds: 7200, GrantedSeconds: 3600, GrantedBy: "teacher", WeightMilli: 1000}},
		want: outcome{Running: true, RequeueAfter: time.Hour, Usage: func() *v1alpha1.UsageStatus {
			u := usage(7200, mt(0))
			u.GrantedSeconds, u.GrantedBy = 3600, "teacher"
			return u
		}()},
	}, {
		name: "the term's end is the reason after the term, not the budget",
		in: RunInput{Userland: env(usage(7200, nil), 0), Deployment: idleStopped, Course: ended, Role: course.Student,
			Budget: &twoHours},
		want: outcome{StopReason: v1alpha1.StoppedTermEnded, RequeueAfter: week.End.Sub(now), Usage: usage(7200, nil)},
	}, {
		name: "a course student who starts is requeued at the exhaustion, before the term's end",
		in: RunInput{Userland: env(usage(0, nil), 0), Deployment: idleStopped, Course: inTerm, Role: course.Student,
			Budget: &twoHours},
		want: outcome{Running: true, RequeueAfter: 2 * time.Hour, Usage: usage(0, mt(0))},
	}, {
		name: "rollover while running: a new week starts at zero, requeued for its exhaustion",
		in: RunInput{Userland: env(&v1alpha1.UsageStatus{PeriodStart: metav1.NewTime(week.Start.AddDate(0, 0, -7)),
			PeriodEnd: &metav1.Time{Time: week.Start}, UsedSeconds: 7000, LimitSeconds: 7200,
			RunningSince: &metav1.Time{Time: week.Start.Add(-time.Minute)}, WeightMilli: 1000}, -time.Minute),
			Deployment: running, Budget: &budget.Budget{Period: budget.Period{Start: now.Add(-time.Hour), End: now.Add(7 * 24 * time.Hour)}, LimitSeconds: 7200, WeightMilli: 1000}},
		want: outcome{Running: true, RequeueAfter: time.Hour, Usage: &v1alpha1.UsageStatus{PeriodStart: *mt(-time.Hour),
			PeriodEnd: mt(7 * 24 * time.Hour), LimitSeconds: 7200, RunningSince: mt(-time.Hour), WeightMilli: 1000}},
	}, {
		name: "the student's other environment running too: both draw on one budget, so half the time left",
		in: RunInput{Userland: env(usage(0, mt(-time.Hour)), -time.Minute), Deployment: running, Budget: &twoHours,
			SharedWith: []*v1alpha1.UsageStatus{usage(0, mt(0))}},
		want: outcome{Running: true, RequeueAfter: 30 * time.Minute, Usage: usage(0, mt(-time.Hour))},
	}, {
		name: "the student's other environment used the budget up: this one cannot start",
		in: RunInput{Userland: env(usage(0, nil), 0), Deployment: idleStopped, Budget: &twoHours,
			SharedWith: []*v1alpha1.UsageStatus{usage(7200, nil)}},
		want: outcome{StopReason: v1alpha1.StoppedBudgetExhausted, RequeueAfter: week.End.Sub(now), Usage: usage(0, nil)},
	}, {
		name: "running while the other used up the rest: stopped now",
		in: RunInput{Userland: env(usage(0, mt(-time.Hour)), -time.Minute), Deployment: running, Budget: &twoHours,
			SharedWith: []*v1alpha1.UsageStatus{usage(3600, nil)}},
		want: outcome{StopReason: v1alpha1.StoppedBudgetExhausted, BudgetExhausted: true,
			RequeueAfter: week.End.Sub(now), Usage: usage(3600, nil)},
	}, {
		name: "a grant recorded on the other environment is the student's",
		in: RunInput{Userland: env(usage(0, nil), 0), Deployment: idleStopped, Budget: &twoHours,
			SharedWith: []*v1alpha1.UsageStatus{func() *v1alpha1.UsageStatus {
				u := usage(7200, nil)
				u.GrantedSeconds = 1800
				return u
			}()}},
		want: outcome{Running: true, RequeueAfter: 30 * time.Minute, Usage: usage(0, mt(0))},
	}, {
		name: "no budget: no usage",
		in:   RunInput{Userland: env(nil, -time.Minute), Deployment: running},
		want: outcome{Running: true},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = now
			d, err := decideRun(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got := outcome{d.Running, d.StopReason, d.BudgetExhausted, d.RequeueAfter, d.Usage}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decideRun (-want +got):\n%s", diff)
			}
		})
	}
}
