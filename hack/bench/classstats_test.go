package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var t0 = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestSummarizeIsNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // out of order on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	tests := map[string]struct {
		in   []time.Duration
		want summary
	}{
		"none":    {nil, summary{}},
		"one":     {[]time.Duration{time.Second}, summary{N: 1, P50: time.Second, P95: time.Second, P99: time.Second, Max: time.Second}},
		"1…100ms": {ds, summary{N: 100, P50: 50 * time.Millisecond, P95: 95 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summarize(tc.in)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestStagesSplitTheWait(t *testing.T) {
	s := studentRun{SignIn: at(0), GatewayWrite: at(300), ControllerWrite: at(350), PodCreated: at(900), PodReady: at(1000), FirstByte: at(2500)}
	total, ok := s.Total()
	if !ok || total != 2500*time.Millisecond {
		t.Errorf("total %s, %v", total, ok)
	}
	parts, ok := s.Stages()
	want := []time.Duration{300 * time.Millisecond, 50 * time.Millisecond, 650 * time.Millisecond, 1500 * time.Millisecond}
	if diff := cmp.Diff(want, parts); !ok || diff != "" {
		t.Errorf("stages (-want +got)\n%s", diff)
	}
	if own, _ := s.PodOwn(); own != 100*time.Millisecond {
		t.Errorf("pod's own %s", own)
	}
	s.ControllerWrite = time.Time{}
	if _, ok := s.Stages(); ok {
		t.Error("stages without the controller's write")
	}
	if _, ok := (studentRun{SignIn: at(0)}).Total(); ok {
		t.Error("a total without a first byte")
	}
}

func TestAttributeTakesEachStepAfterTheOneBefore(t *testing.T) {
	records := []apiRecord{
		// Before the sign-in: the stop the night before.
		{User: "ctrl", Verb: "patch", Resource: "deployments", Name: "s001-lab", Done: at(-5000)},
		{User: "gw", Verb: "patch", Resource: "userlands", Subresource: "status", Name: "s001-lab", Done: at(-4000)},
		{User: "gw", Verb: "get", Resource: "userlands", Name: "s001-lab", Done: at(100)},
		{User: "gw", Verb: "patch", Resource: "userlands", Subresource: "status", Name: "s000-lab", Done: at(150)},
		{User: "gw", Verb: "patch", Resource: "userlands", Subresource: "status", Name: "s001-lab", Done: at(200)},
		{User: "ctrl", Verb: "patch", Resource: "userlands", Subresource: "status", Name: "s001-lab", Done: at(250)},
		{User: "ctrl", Verb: "patch", Resource: "deployments", Subresource: "status", Name: "s001-lab", Done: at(260)},
		{User: "ctrl", Verb: "patch", Resource: "deployments", Name: "s001-lab", Done: at(300)},
		{User: "ctrl", Verb: "patch", Resource: "deployments", Name: "s001-lab", Done: at(400)},
		// The new student's Userland is created by the gateway.
		{User: "gw", Verb: "create", Resource: "userlands", Name: "s002-lab", Done: at(500)},
		{User: "ctrl", Verb: "create", Resource: "deployments", Name: "s002-lab", Done: at(600)},
	}
	pods := map[string]podTimes{
		"s001-lab-5d8f9-old00": {Created: at(-6000), Ready: at(-5900)}, // last night's pod
		"s001-lab-5d8f9-abcde": {Created: at(700), Ready: at(800)},
		"s001-lab-x-5d8f9-zzz": {Created: at(650), Ready: at(660)}, // another Deployment's
		"s002-lab-7c6b5-fghij": {Created: at(900), Ready: at(950)},
	}
	got := []studentRun{{User: "s001", Userland: "s001-lab", SignIn: at(0)}, {User: "s002", Userland: "s002-lab", SignIn: at(10), New: true}, {User: "s003", Userland: "s003-lab", SignIn: at(20)}}
	attribute(got, records, pods, "gw", "ctrl")
	want := []studentRun{
		{User: "s001", Userland: "s001-lab", SignIn: at(0), GatewayWrite: at(200), ControllerWrite: at(300), PodCreated: at(700), PodReady: at(800)},
		{User: "s002", Userland: "s002-lab", SignIn: at(10), New: true, GatewayWrite: at(500), ControllerWrite: at(600), PodCreated: at(900), PodReady: at(950)},
		{User: "s003", Userland: "s003-lab", SignIn: at(20)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

const limiterBefore = `# TYPE rest_client_rate_limiter_duration_seconds histogram
rest_client_rate_limiter_duration_seconds_bucket{host="a",verb="GET",le="0.005"} 10
rest_client_rate_limiter_duration_seconds_bucket{host="a",verb="GET",le="0.025"} 10
rest_client_rate_limiter_duration_seconds_bucket{host="a",verb="GET",le="0.1"} 10
rest_client_rate_limiter_duration_seconds_bucket{host="a",verb="GET",le="+Inf"} 10
rest_client_rate_limiter_duration_seconds_sum{host="a",verb="GET"} 0.01
rest_client_rate_limiter_duration_seconds_count{host="a",verb="GET"} 10
`

const limiterAfter = `# TYPE rest_client_rate_limiter_duration_seconds histogram
rest_client_rate_limiter_duration_seconds_bucket{host="a",verb="GET",le="0.005"} 60
rest_client_rate_limiter_duration_seconds_bucket{host="a",verb="GET",le="0.025"} 70
rest_client_rate_limiter_duration_seconds_bucket{host="a",verb="GET",le="0.1"} 100
rest_client_rate_limiter_duration_seconds_bucket{host="a",verb="GET",le="+Inf"} 110
rest_client_rate_limiter_duration_seconds_sum{host="a",verb="GET"} 3.01
rest_client_rate_limiter_duration_seconds_count{host="a",verb="GET"} 110
rest_client_rate_limiter_duration_seconds_bucket{host="a",verb="PATCH",le="0.005"} 0
rest_client_rate_limiter_duration_seconds_bucket{host="a",verb="PATCH",le="0.025"} 0
rest_client_rate_limiter_duration_seconds_bucket{host="a",verb="PATCH",le="0.1"} 0
rest_client_rate_limiter_duration_seconds_bucket{host="a",verb="PATCH",le="+Inf"} 100
rest_client_rate_limiter_duration_seconds_sum{host="a",verb="PATCH"} 200
rest_client_rate_limiter_duration_seconds_count{host="a",verb="PATCH"} 100
`

func TestHistogramDeltas(t *testing.T) {
	parse := func(s string) histogram {
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return histogramOf(fams, "rest_client_rate_limiter_duration_seconds", nil)
	}
	d := parse(limiterAfter).minus(parse(limiterBefore))
	if d.Count != 200 || math.Abs(d.Sum-203) > 1e-9 {
		t.Errorf("count %d, sum %v; want 200 and 203", d.Count, d.Sum)
	}
	// Of the 200 since: 50 under 5 ms, 10 more under 25 ms.
	if got := d.Above(0.025); got != 140 {
		t.Errorf("above 25 ms: %d, want 140", got)
	}
	tests := map[float64]float64{0.25: 0.005, 0.30: 0.025, 0.45: 0.1, 0.5: math.Inf(1), 0.99: math.Inf(1)}
	for q, want := range tests {
		if got := d.Quantile(q); got != want {
			t.Errorf("quantile %v: %v, want %v", q, got, want)
		}
	}
	if got := (histogram{}).Quantile(0.99); got != 0 {
		t.Errorf("no observations: %v", got)
	}
	if got := histogramOf(nil, "missing", nil); got.Count != 0 {
		t.Errorf("a missing metric counts %d", got.Count)
	}
}

func TestRateOfCountsTheWindowAndItsBusiestSecond(t *testing.T) {
	times := []time.Time{at(-1), at(0), at(100), at(900), at(1500), at(3999), at(4000)}
	got := rateOf(times, at(0), at(4000))
	if diff := cmp.Diff(rate{Total: 5, PerSecond: 1.25, Peak: 3}, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestPodOwner(t *testing.T) {
	tests := map[string]string{
		"s001-lab-5d8f9c7b-abcde": "s001-lab",
		"a-b":                     "",
		"nodash":                  "",
	}
	for pod, want := range tests {
		if got := podOwner(pod); got != want {
			t.Errorf("podOwner(%q) = %q, want %q", pod, got, want)
		}
	}
}

func TestRefreshDelayFollowsThePage(t *testing.T) {
	tests := map[string]time.Duration{
		`<meta http-equiv="refresh" content="2">`: 2 * time.Second,
		`<meta http-equiv="refresh" content="0">`: 0,
		`<p>no refresh</p>`:                       time.Second,
	}
	for page, want := range tests {
		if got := refreshDelay([]byte(page)); got != want {
			t.Errorf("%s: %s, want %s", page, got, want)
		}
	}
}

func TestStageSpans(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	s := newStages()
	for i := range 10 {
		env := fmt.Sprintf("u-%d", i)
		s.mark(env, stageCreated, t0)
		s.mark(env, stageDeployment, t0.Add(time.Duration(i+1)*100*time.Millisecond))
		s.mark(env, stageDeployment, t0.Add(time.Hour)) // only the first sighting counts
	}
	s.mark("never-created", stageDeployment, t0) // reached one end only: left out
	got := s.span(stageCreated, stageDeployment)
	want := stageSpan{From: stageCreated, To: stageDeployment, N: 10, P50: 600 * time.Millisecond, P90: time.Second, P99: time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("span (-want +got):\n%s", diff)
	}
	var none *stages
	none.mark("u", stageCreated, t0) // a nil recorder records nothing, without panicking
}

func TestErrorKinds(t *testing.T) {
	cases := map[string]error{
		"HTTP 502":           fmt.Errorf("fetch: %w", statusError(502)),
		"connection reset":   &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)},
		"connection refused": &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)},
		"connection closed before the answer (EOF)": fmt.Errorf("Get x: %w", io.EOF),
		"timeout":          &net.OpError{Op: "dial", Err: timeoutErr{}},
		"other: surprised": errors.New("surprised"),
	}
	for want, err := range cases {
		if got := errorKind(err); got != want {
			t.Errorf("errorKind(%v) = %q, want %q", err, got, want)
		}
	}
	if diff := cmp.Diff(map[string]int{"a": 3, "b": 1}, addKinds(addKinds(nil, map[string]int{"a": 1}), map[string]int{"a": 2, "b": 1})); diff != "" {
		t.Errorf("addKinds (-want +got):\n%s", diff)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
