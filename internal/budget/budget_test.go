package budget_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func mt(s string) *metav1.Time { return &metav1.Time{Time: at(s)} }

func TestWeekStartIsMondayMidnightUTC(t *testing.T) {
	cases := map[string]struct{ now, want string }{
		"a Thursday":                {"2026-11-26T07:35:00Z", "2026-11-23T00:00:00Z"},
		"Monday at midnight itself": {"2026-11-23T00:00:00Z", "2026-11-23T00:00:00Z"},
		"Sunday just before":        {"2026-11-22T23:59:59Z", "2026-11-16T00:00:00Z"},
		"Monday morning in Tokyo is still Sunday in UTC": {"2026-11-23T08:00:00+09:00", "2026-11-16T00:00:00Z"},
		"across a year": {"2027-01-01T12:00:00Z", "2026-12-28T00:00:00Z"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := budget.WeekStart(at(tc.now)); !got.Equal(at(tc.want)) {
				t.Errorf("WeekStart(%s) = %s, want %s", tc.now, got, tc.want)
			}
		})
	}
}

func TestMilliCPU(t *testing.T) {
	c := func(req, lim string) corev1.Container {
		var c corev1.Container
		if req != "" {
			c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(req)}
		}
		if lim != "" {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(lim)}
		}
		return c
	}
	cases := map[string]struct {
		pod  *corev1.PodSpec
		want int64
	}{
		"no pod":                {nil, 1000},
		"nothing requested":     {&corev1.PodSpec{Containers: []corev1.Container{c("", "")}}, 1000},
		"requests summed":       {&corev1.PodSpec{Containers: []corev1.Container{c("500m", "2"), c("250m", "")}}, 750},
		"limit when no request": {&corev1.PodSpec{Containers: []corev1.Container{c("", "2")}}, 2000},
		"two CPUs requested":    {&corev1.PodSpec{Containers: []corev1.Container{c("2", "")}}, 2000},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := budget.MilliCPU(tc.pod); got != tc.want {
				t.Errorf("MilliCPU = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestUsageIsComputedOnRead(t *testing.T) {
	running := &v1alpha1.UsageStatus{
		PeriodStart: *mt("2026-11-23T00:00:00Z"), PeriodEnd: mt("2026-11-30T00:00:00Z"),
		UsedSeconds: 3600, LimitSeconds: 4 * 3600, GrantedSeconds: 3600,
		RunningSince: mt("2026-11-26T10:00:00Z"), WeightMilli: 2000,
	}
	cases := map[string]struct {
		u          *v1alpha1.UsageStatus
		now        string
		used, left int64
	}{
		"running, half an hour at two CPUs": {running, "2026-11-26T10:30:00Z", 3600 + 3600, 5*3600 - 7200},
		"at the start of the run":           {running, "2026-11-26T10:00:00Z", 3600, 4 * 3600},
		"past the period's end: the grant lapses and the run counts from the reset": {
			running, "2026-11-30T00:10:00Z", 1200, 4*3600 - 1200},
		"no usage": {nil, "2026-11-26T10:00:00Z", 0, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := []int64{budget.Used(tc.u, at(tc.now)), budget.Remaining(tc.u, at(tc.now))}
			if diff := cmp.Diff([]int64{tc.used, tc.left}, got); diff != "" {
				t.Errorf("[used, remaining] (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExhaustedAtIsExact(t *testing.T) {
	u := &v1alpha1.UsageStatus{UsedSeconds: 3600, LimitSeconds: 2 * 3600, RunningSince: mt("2026-11-26T10:00:00Z"), WeightMilli: 1500}
	want := at("2026-11-26T10:40:00Z") // 3600 s left at 1.5 per second
	got := budget.ExhaustedAt(u)
	if !got.Equal(want) {
		t.Fatalf("ExhaustedAt = %s, want %s", got, want)
	}
	if left := budget.Remaining(u, got); left != 0 {
		t.Errorf("Remaining at the deadline = %d, want 0", left)
	}
	if left := budget.Remaining(u, got.Add(-time.Second)); left <= 0 {
		t.Errorf("Remaining a second before the deadline = %d, want > 0", left)
	}
	if got := budget.ExhaustedAt(&v1alpha1.UsageStatus{LimitSeconds: 10}); !got.IsZero() {
		t.Errorf("ExhaustedAt of a stopped environment = %s, want zero", got)
	}
}

func TestAdvanceWritesOnlyAtTransitions(t *testing.T) {
	week := budget.Period{Start: at("2026-11-23T00:00:00Z"), End: at("2026-11-30T00:00:00Z")}
	next := budget.Period{Start: at("2026-11-30T00:00:00Z"), End: at("2026-12-07T00:00:00Z")}
	b := budget.Budget{Period: week, LimitSeconds: 36000, WeightMilli: 1000}
	stopped := &v1alpha1.UsageStatus{PeriodStart: *mt("2026-11-23T00:00:00Z"), PeriodEnd: mt("2026-11-30T00:00:00Z"),
		UsedSeconds: 600, LimitSeconds: 36000}
	runningFrom := func(since string, used int64) *v1alpha1.UsageStatus {
		u := stopped.DeepCopy()
		u.UsedSeconds, u.RunningSince, u.WeightMilli = used, mt(since), 1000
		return u
	}
	cases := map[string]struct {
		prev    *v1alpha1.UsageStatus
		b       budget.Budget
		now     string
		running bool
		want    *v1alpha1.UsageStatus
	}{
		"first look, stopped": {nil, b, "2026-11-26T10:00:00Z", false,
			&v1alpha1.UsageStatus{PeriodStart: *mt("2026-11-23T00:00:00Z"), PeriodEnd: mt("2026-11-30T00:00:00Z"), LimitSeconds: 36000}},
		"stays stopped: unchanged": {stopped, b, "2026-11-26T10:00:00Z", false, stopped},
		"starts":                   {stopped, b, "2026-11-26T10:00:00.7Z", true, runningFrom("2026-11-26T10:00:00Z", 600)},
		"keeps running: unchanged": {runningFrom("2026-11-26T10:00:00Z", 600), b, "2026-11-26T11:00:00Z", true, runningFrom("2026-11-26T10:00:00Z", 600)},
		"stops after an hour": {runningFrom("2026-11-26T10:00:00Z", 600), b, "2026-11-26T11:00:00Z", false, func() *v1alpha1.UsageStatus {
			u := stopped.DeepCopy()
			u.UsedSeconds = 4200
			return u
		}()},
		"rolls over while running: counts from the reset": {runningFrom("2026-11-29T23:00:00Z", 30000),
			budget.Budget{Period: next, LimitSeconds: 36000, WeightMilli: 1000}, "2026-11-30T00:00:05Z", true,
			&v1alpha1.UsageStatus{PeriodStart: *mt("2026-11-30T00:00:00Z"), PeriodEnd: mt("2026-12-07T00:00:00Z"),
				LimitSeconds: 36000, RunningSince: mt("2026-11-30T00:00:00Z"), WeightMilli: 1000}},
		"rolls over while stopped: starts afresh": {stopped, budget.Budget{Period: next, LimitSeconds: 36000, WeightMilli: 1000},
			"2026-12-01T09:00:00Z", false,
			&v1alpha1.UsageStatus{PeriodStart: *mt("2026-11-30T00:00:00Z"), PeriodEnd: mt("2026-12-07T00:00:00Z"), LimitSeconds: 36000}},
		"a grant is recorded": {stopped, budget.Budget{Period: week, LimitSeconds: 36000, GrantedSeconds: 7200, GrantedBy: "teacher", WeightMilli: 1000},
			"2026-11-26T10:00:00Z", false, func() *v1alpha1.UsageStatus {
				u := stopped.DeepCopy()
				u.GrantedSeconds, u.GrantedBy = 7200, "teacher"
				return u
			}()},
		"a new weight settles the run so far": {runningFrom("2026-11-26T10:00:00Z", 600),
			budget.Budget{Period: week, LimitSeconds: 36000, WeightMilli: 500}, "2026-11-26T10:10:00Z", true, func() *v1alpha1.UsageStatus {
				u := runningFrom("2026-11-26T10:10:00Z", 1200)
				u.WeightMilli = 500
				return u
			}()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := budget.Advance(tc.prev, tc.b, at(tc.now), tc.running)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Advance (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGrants(t *testing.T) {
	week := at("2026-11-23T00:00:00Z")
	cases := map[string]struct {
		annotation string
		wantHours  int64
		wantBy     string
	}{
		"none":                   {"", 0, ""},
		"for this week":          {"2026-11-23T00:00:00Z=3;teacher", 3, "teacher"},
		"without who":            {"2026-11-23T00:00:00Z=3", 3, ""},
		"for last week: nothing": {"2026-11-16T00:00:00Z=3;teacher", 0, ""},
		"garbage: nothing":       {"lots", 0, ""},
		"too many: nothing":      {"2026-11-23T00:00:00Z=5000", 0, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h, by := budget.GrantFor(tc.annotation, week)
			if diff := cmp.Diff([]any{tc.wantHours, tc.wantBy}, []any{h, by}); diff != "" {
				t.Errorf("GrantFor (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("adding to this week's grant", func(t *testing.T) {
		got, err := budget.AddGrant("2026-11-23T00:00:00Z=3;ta", week, 2, "teacher")
		if err != nil || got != "2026-11-23T00:00:00Z=5;teacher" {
			t.Errorf("AddGrant = %q, %v; want 5 hours by teacher", got, err)
		}
	})
	t.Run("adding after last week's grant starts afresh", func(t *testing.T) {
		got, err := budget.AddGrant("2026-11-16T00:00:00Z=3;ta", week, 2, "teacher")
		if err != nil || got != "2026-11-23T00:00:00Z=2;teacher" {
			t.Errorf("AddGrant = %q, %v; want 2 hours", got, err)
		}
	})
	t.Run("a grant that is not positive is refused", func(t *testing.T) {
		if _, err := budget.AddGrant("", week, 0, "teacher"); err == nil {
			t.Error("AddGrant of 0 hours succeeded")
		}
	})
}
