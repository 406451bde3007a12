package budget_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
)

// usage builds a UsageStatus in the week of 2026-11-23 with a 10-hour
// budget.
type usage struct{ u v1alpha1.UsageStatus }

func weekUsage() *usage {
	return &usage{v1alpha1.UsageStatus{PeriodStart: *mt("2026-11-23T00:00:00Z"), PeriodEnd: mt("2026-11-30T00:00:00Z"), LimitSeconds: 36000}}
}

func (b *usage) used(s int64) *usage    { b.u.UsedSeconds = s; return b }
func (b *usage) granted(s int64) *usage { b.u.GrantedSeconds = s; return b }
func (b *usage) running(since string, weightMilli int64) *usage {
	b.u.RunningSince, b.u.WeightMilli = mt(since), weightMilli
	return b
}
func (b *usage) lastWeek() *usage {
	b.u.PeriodStart, b.u.PeriodEnd = *mt("2026-11-16T00:00:00Z"), mt("2026-11-23T00:00:00Z")
	return b
}
func (b *usage) obj() *v1alpha1.UsageStatus { return b.u.DeepCopy() }

func TestPoolIsOneBudgetForAStudentsEnvironments(t *testing.T) {
	now := at("2026-11-26T12:00:00Z")
	cases := map[string]struct {
		own    *v1alpha1.UsageStatus
		others []*v1alpha1.UsageStatus
		want   budget.Pooled
	}{
		"alone: the environment's own figures": {weekUsage().used(600).obj(), nil,
			budget.Pooled{Used: 600, Limit: 36000, Remaining: 35400}},
		"the limit counts once, the use of both": {weekUsage().used(600).obj(), []*v1alpha1.UsageStatus{weekUsage().used(1800).obj()},
			budget.Pooled{Used: 2400, Limit: 36000, Remaining: 33600}},
		"a running one counts on read": {weekUsage().obj(), []*v1alpha1.UsageStatus{weekUsage().running("2026-11-26T11:00:00Z", 1000).obj()},
			budget.Pooled{Used: 3600, Limit: 36000, Remaining: 32400}},
		"grants on either environment are the student's": {weekUsage().granted(3600).obj(), []*v1alpha1.UsageStatus{weekUsage().granted(7200).obj()},
			budget.Pooled{Used: 0, Limit: 36000 + 3600 + 7200, Remaining: 46800}},
		"last week's grant on another does not count": {weekUsage().obj(), []*v1alpha1.UsageStatus{weekUsage().lastWeek().granted(7200).used(900).obj()},
			budget.Pooled{Used: 0, Limit: 36000, Remaining: 36000}},
		"another still running since last week counts from this week's start": {weekUsage().obj(),
			[]*v1alpha1.UsageStatus{weekUsage().lastWeek().used(900).running("2026-11-22T00:00:00Z", 1000).obj()},
			budget.Pooled{Used: 3*86400 + 12*3600, Limit: 36000, Remaining: 36000 - (3*86400 + 12*3600)}},
		"an environment without a budget is nothing": {weekUsage().used(60).obj(), []*v1alpha1.UsageStatus{nil},
			budget.Pooled{Used: 60, Limit: 36000, Remaining: 35940}},
		"no budget at all": {nil, []*v1alpha1.UsageStatus{weekUsage().used(60).obj()}, budget.Pooled{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, budget.Pool(tc.own, tc.others, now)); diff != "" {
				t.Errorf("Pool (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPoolExhaustedAtCountsEveryRunningEnvironment(t *testing.T) {
	now := at("2026-11-26T12:00:00Z")
	cases := map[string]struct {
		own    *v1alpha1.UsageStatus
		others []*v1alpha1.UsageStatus
		want   time.Time // zero: not running
	}{
		"alone, as ExhaustedAt": {weekUsage().used(34200).running("2026-11-26T12:00:00Z", 1000).obj(), nil,
			at("2026-11-26T12:30:00Z")},
		"two running at once run out in half the time": {weekUsage().used(32400).running("2026-11-26T12:00:00Z", 1000).obj(),
			[]*v1alpha1.UsageStatus{weekUsage().running("2026-11-26T12:00:00Z", 1000).obj()},
			at("2026-11-26T12:30:00Z")},
		"a stopped one's use shortens it, its weight does not": {weekUsage().running("2026-11-26T12:00:00Z", 2000).obj(),
			[]*v1alpha1.UsageStatus{weekUsage().used(36000 - 1200).obj()},
			at("2026-11-26T12:10:00Z")},
		"already used up by the other: now": {weekUsage().running("2026-11-26T12:00:00Z", 1000).obj(),
			[]*v1alpha1.UsageStatus{weekUsage().used(40000).obj()}, now},
		"not running": {weekUsage().obj(), []*v1alpha1.UsageStatus{weekUsage().running("2026-11-26T11:00:00Z", 1000).obj()}, time.Time{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := budget.PoolExhaustedAt(tc.own, tc.others, now)
			if !got.Equal(tc.want) {
				t.Fatalf("PoolExhaustedAt = %s, want %s", got, tc.want)
			}
			if got.IsZero() {
				return
			}
			if left := budget.Pool(tc.own, tc.others, got).Remaining; left > 0 {
				t.Errorf("at the deadline %d seconds are left, want none", left)
			}
			if got.After(now) {
				if left := budget.Pool(tc.own, tc.others, got.Add(-time.Second)).Remaining; left <= 0 {
					t.Errorf("a second before the deadline nothing is left (%d), want some", left)
				}
			}
		})
	}
}
