package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// budgetAvailable reports whether restarting one more of the template's
// running environments keeps the unavailable ones within maxUnavailable.
// Unavailable counts running environments whose Deployment is not available
// (from the cache) plus restarts started here that the cache may not show.
func (r *UserlandReconciler) budgetAvailable(ctx context.Context, s *reconcileState) (bool, error) {
	counts := r.inflight.countsOf(s.template.Key, s.now)
	if counts == nil {
		var err error
		if counts, err = r.countSiblings(ctx, s.template.Key, s.now); err != nil {
			return false, err
		}
		r.inflight.keepCounts(s.template.Key, counts)
	}
	unavailable := len(counts.unavailable) + r.inflight.count(s.template.Key, s.now, counts.unavailable)
	maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(s.template.Spec.Rollout.MaxUnavailable, counts.running, true)
	if err != nil {
		return false, fmt.Errorf("resolving maxUnavailable of %s: %w", s.template.Key, err)
	}
	maxUnavailable = max(maxUnavailable, 1)
	ctrl.LoggerFrom(ctx).V(1).Info("rollout budget", "template", s.template.Key,
		"running", counts.running, "unavailable", unavailable, "maxUnavailable", maxUnavailable)
	return unavailable < maxUnavailable, nil
}

// siblingCounts is a template's running environments, and those of them
// whose Deployment is not available, as the cache showed them at a time.
type siblingCounts struct {
	running     int
	unavailable map[types.NamespacedName]bool
	at          time.Time
}

// countsMaxAge bounds how long one count serves decisions when no event
// of the template's Deployments said it changed (pendingSiblings drops it
// on each): a change the events do not cover, such as a sibling Userland
// deleted before its Deployment, is seen within this.
const countsMaxAge = time.Second

// countSiblings counts the template's environments from the cache without
// copying an object: the Userlands through the template index, their
// Deployments in one list. A rollout to ten thousand used to copy every
// sibling's Deployment for each pending environment's decision, which
// took long enough under the decision lock to admit about four restarts a
// second however much of maxUnavailable was free.
func (r *UserlandReconciler) countSiblings(ctx context.Context, key string, now time.Time) (*siblingCounts, error) {
	var siblings v1alpha1.UserlandList
	if err := r.Client.List(ctx, &siblings, client.MatchingFields{IndexTemplateKey: key}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing userlands of %s: %w", key, err)
	}
	counts := &siblingCounts{unavailable: map[types.NamespacedName]bool{}, at: now}
	if len(siblings.Items) == 0 {
		return counts, nil
	}
	var opts []client.ListOption
	if ns := siblings.Items[0].Namespace; all(siblings.Items, func(ul *v1alpha1.Userland) bool { return ul.Namespace == ns }) {
		opts = append(opts, client.InNamespace(ns))
	}
	var deps appsv1.DeploymentList
	if err := r.Client.List(ctx, &deps, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		return nil, fmt.Errorf("listing deployments of %s: %w", key, err)
	}
	byName := make(map[types.NamespacedName]*appsv1.Deployment, len(deps.Items))
	for i := range deps.Items {
		byName[client.ObjectKeyFromObject(&deps.Items[i])] = &deps.Items[i]
	}
	for i := range siblings.Items {
		name := client.ObjectKeyFromObject(&siblings.Items[i])
		dep := byName[name]
		if dep == nil || dep.Spec.Replicas == nil || *dep.Spec.Replicas == 0 {
			continue
		}
		counts.running++
		if !rolledOut(dep) {
			counts.unavailable[name] = true
		}
	}
	return counts, nil
}

func all[T any](items []T, f func(*T) bool) bool {
	for i := range items {
		if !f(&items[i]) {
			return false
		}
	}
	return true
}

// rolloutTracker remembers Immediate restarts this process started and whose
// Deployment may not show in the cache yet, so concurrent reconciles never
// exceed maxUnavailable.
type rolloutTracker struct {
	// decide serialises Immediate budget decisions, so two workers cannot
	// both take the last free slot.
	decide   sync.Mutex
	mu       sync.Mutex
	restarts map[string]map[types.NamespacedName]time.Time
	// counts is each template's last count of its siblings, kept for the
	// decisions that follow until an event of its Deployments drops it.
	counts map[string]*siblingCounts
}

// countsOf is template's kept count, nil when there is none younger than
// countsMaxAge at now.
func (t *rolloutTracker) countsOf(template string, now time.Time) *siblingCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.counts[template]
	if c == nil || now.Sub(c.at) >= countsMaxAge || now.Before(c.at) {
		return nil
	}
	return c
}

func (t *rolloutTracker) keepCounts(template string, c *siblingCounts) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[string]*siblingCounts{}
	}
	t.counts[template] = c
}

// dropCounts forgets template's count: one of its Deployments changed.
func (t *rolloutTracker) dropCounts(template string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.counts, template)
}

// inflightExpiry bounds how long a restart counts against the budget if its
// environment never becomes ready (it then counts through the cache).
const inflightExpiry = 10 * time.Minute

func (t *rolloutTracker) count(template string, now time.Time, exclude map[types.NamespacedName]bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for name, at := range t.restarts[template] {
		if now.Sub(at) > inflightExpiry {
			delete(t.restarts[template], name)
			continue
		}
		if !exclude[name] {
			n++
		}
	}
	return n
}

func (t *rolloutTracker) add(template string, name types.NamespacedName, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.restarts == nil {
		t.restarts = map[string]map[types.NamespacedName]time.Time{}
	}
	if t.restarts[template] == nil {
		t.restarts[template] = map[types.NamespacedName]time.Time{}
	}
	t.restarts[template][name] = now
}

func (t *rolloutTracker) done(template string, name types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.restarts[template], name)
}
