package main

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestInterleavedRunsRoundByRoundAndKeepsEveryRun(t *testing.T) {
	settle = 0
	rps := map[string][]float64{"a": {30, 10, 20}, "b": {5, 7, 6}}
	var calls []string
	round := map[string]int{}
	got := interleaved(3, []string{"a", "b"}, func(name string) loadResult {
		calls = append(calls, name)
		r := loadResult{RPS: rps[name][round[name]]}
		round[name]++
		return r
	})

	// The first round keeps the order; every round runs each target once.
	if diff := cmp.Diff([]string{"a", "b"}, calls[:2]); diff != "" {
		t.Errorf("first round (-want +got):\n%s", diff)
	}
	for r := range 3 {
		round := append([]string(nil), calls[2*r:2*r+2]...)
		sort.Strings(round)
		if diff := cmp.Diff([]string{"a", "b"}, round); diff != "" {
			t.Errorf("round %d runs (-want +got):\n%s", r, diff)
		}
	}
	want := map[string]loadResult{"a": {RPS: 20}, "b": {RPS: 6}}
	if diff := cmp.Diff(want, medians(got, func(r loadResult) float64 { return r.RPS })); diff != "" {
		t.Errorf("medians (-want +got):\n%s", diff)
	}
}

func TestPairedRatioComparesWithinEachRound(t *testing.T) {
	// The baseline drifts from 100 to 300 while the target stays at 0.9 of
	// it in every round: pairing round by round gives 0.9 whatever the
	// drift.
	bare := []loadResult{{RPS: 100}, {RPS: 300}, {RPS: 200}}
	gw := []loadResult{{RPS: 90}, {RPS: 270}, {RPS: 180}}
	if got := pairedRatio(gw, bare); got < 0.899 || got > 0.901 {
		t.Errorf("pairedRatio = %v, want 0.9", got)
	}
	// A drift that falls between rounds does not leak into the ratio.
	bare = []loadResult{{RPS: 100}, {RPS: 100}, {RPS: 100}}
	gw = []loadResult{{RPS: 80}, {RPS: 95}, {RPS: 300}}
	if got := pairedRatio(gw, bare); got != 0.95 {
		t.Errorf("pairedRatio = %v, want the median 0.95", got)
	}
	if got := pairedRatio(nil, bare); got != 0 {
		t.Errorf("pairedRatio of nothing = %v, want 0", got)
	}
}

func TestSinceKeepsOnlyWhatChanged(t *testing.T) {
	before := map[string]int{"POST pods": 10, "PUT leases": 4}
	after := map[string]int{"POST pods": 110, "PUT leases": 4, "POST userlands": 100}
	want := map[string]int{"POST pods": 100, "POST userlands": 100}
	if diff := cmp.Diff(want, since(before, after)); diff != "" {
		t.Errorf("since (-want +got):\n%s", diff)
	}
}

func TestPercentile(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 51 * time.Millisecond}, {0.99, 100 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		if got := percentile(lat, tc.p); got != tc.want {
			t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 0.99); got != 0 {
		t.Errorf("percentile of nothing = %v, want 0", got)
	}
}

func TestNotMeasuredListsWhatTheFlagsLeftOut(t *testing.T) {
	tests := []struct {
		name string
		o    options
		want []string
	}{
		{
			name: "the default run",
			o:    options{sizes: []int{100, 1000}, wsCounts: []int{1000, 8000}, gateway: true, rollout: true, slowClients: 500, class: classOptions{Students: 500}, classWarm: 200, realWake: true},
			want: []string{"Provisioning, API economy and controller footprint at N = 5000 (`make bench-large`, about 22 minutes, writes docs/benchmarks-5000.md)."},
		},
		{
			name: "the large run",
			o:    options{sizes: []int{5000}},
			want: []string{
				"Provisioning, API economy and controller footprint at N = 100 (`go run ./hack/bench -n 100`).",
				"Provisioning, API economy and controller footprint at N = 1000 (`go run ./hack/bench -n 1000`).",
				"Rollout of an image change (run without `-rollout=false`).",
				"The class-start scenario (`-class-students 500`).",
				"The class start of a course, cold and warmed by its timetable (`-class-warm-students 200`).",
				"Each real app's wake on a real node beside kwok (run without `-real-wake=false`).",
				"The gateway: throughput, latency, held WebSockets and wake latency (run without `-gateway=false`).",
			},
		},
		{
			name: "everything",
			o:    options{sizes: []int{100, 1000, 5000}, wsCounts: []int{1000}, gateway: true, rollout: true, slowClients: 500, class: classOptions{Students: 500}, classWarm: 200, realWake: true},
		},
		{
			name: "without the class start of a course",
			o:    options{sizes: []int{100, 1000, 5000}, wsCounts: []int{1000}, gateway: true, rollout: true, slowClients: 500, class: classOptions{Students: 500}, realWake: true},
			want: []string{"The class start of a course, cold and warmed by its timetable (`-class-warm-students 200`)."},
		},
		{
			name: "without the real-node wake",
			o:    options{sizes: []int{100, 1000, 5000}, wsCounts: []int{1000}, gateway: true, rollout: true, slowClients: 500, class: classOptions{Students: 500}, classWarm: 200},
			want: []string{"Each real app's wake on a real node beside kwok (run without `-real-wake=false`)."},
		},
		{
			name: "gateway without WebSockets",
			o:    options{sizes: []int{100, 1000, 5000}, gateway: true, rollout: true, slowClients: 500, class: classOptions{Students: 500}, classWarm: 200, realWake: true},
			want: []string{"Held WebSockets (`-websockets 1000,8000`)."},
		},
		{
			name: "gateway without slow clients",
			o:    options{sizes: []int{100, 1000, 5000}, wsCounts: []int{1000}, gateway: true, rollout: true, class: classOptions{Students: 500}, classWarm: 200, realWake: true},
			want: []string{"The gateway under slow clients (`-slow-clients 500`)."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, notMeasured(tt.o)); diff != "" {
				t.Errorf("notMeasured (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEarlierNamesOnlyUserlandsLeftByEarlierSizes(t *testing.T) {
	results := []provisionResult{{N: 100}, {N: 1000}}
	if got := earlier(totalBefore(results, 100)); got != "" {
		t.Errorf("first size: got %q, want nothing", got)
	}
	if got, want := earlier(totalBefore(results, 1000)), " (plus 100 earlier)"; got != want {
		t.Errorf("second size: got %q, want %q", got, want)
	}
}
