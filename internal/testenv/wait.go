package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// Eventually polls cond every 100 ms until it holds or timeout passes,
// then fails t with what and cond's last error. An error from cond is
// retried, not fatal: pods in the simulated cluster take real (short) time
// to schedule, and objects to reach a cache. A control plane that died
// fails t at once rather than after the timeout.
func (e *Environment) Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := e.Alive(); err != nil {
			return false, err
		}
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: %v after %s (last error: %v)", what, err, time.Since(start).Round(time.Millisecond), last)
	}
}

// WaitPhase waits until the Userland ns/name reports phase for its current
// generation (status.observedGeneration), and returns it as read then.
func (e *Environment) WaitPhase(t testing.TB, ns, name string, phase v1alpha1.Phase) *v1alpha1.Userland {
	t.Helper()
	var ul v1alpha1.Userland
	e.Eventually(t, 90*time.Second, fmt.Sprintf("userland %s/%s phase %s", ns, name, phase), func(ctx context.Context) (bool, error) {
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ul); err != nil {
			return false, err
		}
		if ul.Status.Phase == phase && ul.Status.ObservedGeneration == ul.Generation {
			return true, nil
		}
		// Not an error to stop on: what a timeout reports it last saw.
		return false, fmt.Errorf("still phase %q, generation %d observed %d, conditions %s",
			ul.Status.Phase, ul.Generation, ul.Status.ObservedGeneration, conditionSummary(ul.Status.Conditions))
	})
	return &ul
}

// RolloutSample is one look at a rollout of a template's image across a
// namespace's environments.
type RolloutSample struct {
	// Updated counts Deployments whose first container runs the new
	// image; Unavailable, those not (yet) available with their current
	// generation: what maxUnavailable bounds.
	Updated, Unavailable int
}

// SampleRollout reads the namespace's Deployments from the API server (not
// a cache, which would lag) and counts a rollout to image.
func (e *Environment) SampleRollout(ctx context.Context, ns, image string) (RolloutSample, error) {
	var deps appsv1.DeploymentList
	if err := e.Client.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		return RolloutSample{}, err
	}
	var s RolloutSample
	for _, d := range deps.Items {
		if d.Spec.Template.Spec.Containers[0].Image == image {
			s.Updated++
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < 1 || d.Status.UpdatedReplicas < 1 {
			s.Unavailable++
		}
	}
	return s, nil
}

// WaitDeploymentsAvailable waits until every Deployment in ns is available
// at its current generation, as SampleRollout counts it. A rollout's bound
// is measured on Deployments, and a Userland says Ready from its Ready pod
// before the Deployment controller records the Deployment available: a
// rollout test starts from all available, or it counts provisioning's
// stragglers as the rollout's. A Deployment scaled to zero never counts
// as available here: for namespaces whose environments all run.
func (e *Environment) WaitDeploymentsAvailable(t testing.TB, ns string, timeout time.Duration) {
	t.Helper()
	e.Eventually(t, timeout, "every Deployment in "+ns+" available", func(ctx context.Context) (bool, error) {
		seen, err := e.SampleRollout(ctx, ns, "")
		return err == nil && seen.Unavailable == 0, err
	})
}

// conditionSummary is each condition's type, status, reason and message on
// one line, for a failure message.
func conditionSummary(conds []metav1.Condition) string {
	var b strings.Builder
	for _, c := range conds {
		fmt.Fprintf(&b, "[%s=%s %s: %s] ", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}
