package envtiming

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// deployment builds a one-replica Deployment's state: wanted replicas,
// generation observed or not, and its pod's state.
func deployment(want int32, observed bool, replicas, updated, available int32, availableCond bool) *appsv1.Deployment {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To(want)}}
	d.Generation = 2
	d.Status.ObservedGeneration = 1
	if observed {
		d.Status.ObservedGeneration = 2
	}
	d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas = replicas, updated, available
	status := corev1.ConditionFalse
	if availableCond {
		status = corev1.ConditionTrue
	}
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: status}}
	return d
}

// Unavailable counts as the controller's rollout budget does: a running
// environment restarting, in any stage, counts; a stopped one never does.
func TestUnavailable(t *testing.T) {
	deps := map[string]*appsv1.Deployment{
		"rolled-out":        deployment(1, true, 1, 1, 1, true),
		"change-not-seen":   deployment(1, false, 1, 1, 1, true),
		"old-pod-going":     deployment(1, true, 1, 0, 0, false),
		"new-pod-not-ready": deployment(1, true, 1, 1, 0, false),
		"old-and-new":       deployment(1, true, 2, 1, 1, true),
		"ready-before-cond": deployment(1, true, 1, 1, 1, false),
		"stopped":           deployment(0, true, 0, 0, 0, true), // Available, as Kubernetes says at 0
		"stopped-pod-going": deployment(0, false, 1, 0, 1, true),
	}
	got := map[string]bool{}
	for name, d := range deps {
		got[name] = RolledOut(d)
	}
	want := map[string]bool{
		"rolled-out": true, "change-not-seen": false, "old-pod-going": false, "new-pod-not-ready": false,
		"old-and-new": false, "ready-before-cond": false, "stopped": true, "stopped-pod-going": false,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RolledOut (-want +got):\n%s", diff)
	}
	// Of the running ones, all but "rolled-out" are restarting.
	if got, want := Unavailable(deps), 5; got != want {
		t.Errorf("Unavailable = %d, want %d", got, want)
	}
}

func TestSummary(t *testing.T) {
	tests := map[string]struct {
		in   []string
		want string
	}{
		"none":     {nil, ""},
		"one":      {[]string{"HTTP 502"}, "HTTP 502"},
		"repeated": {[]string{"HTTP 503", "HTTP 502", "HTTP 502", "HTTP 502", "EOF"}, "HTTP 503, HTTP 502 ×3, EOF"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Answer{Others: tc.in}.Summary()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequests(t *testing.T) {
	tests := map[string]struct {
		in   Answer
		want string
	}{
		"first": {Answer{Attempts: 1}, "1 request"},
		"after 502s": {Answer{Attempts: 4, Others: []string{"HTTP 502", "HTTP 502", "HTTP 502"},
			Took: []time.Duration{time.Minute, time.Millisecond, time.Millisecond, 2 * time.Millisecond}},
			"4 requests, after HTTP 502 ×3; each took 1m0s, 1ms, 1ms, 2ms"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.in.Requests()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
