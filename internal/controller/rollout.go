package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	var siblings v1alpha1.UserlandList
	// Read-only: the cache's objects are not copied.
	if err := r.Client.List(ctx, &siblings, client.MatchingFields{IndexTemplateKey: s.template.Key}, client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("listing userlands of %s: %w", s.template.Key, err)
	}
	running, unavailable := 0, 0
	counted := map[types.NamespacedName]bool{}
	for i := range siblings.Items {
		sib := &siblings.Items[i]
		var dep appsv1.Deployment
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(sib), &dep); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, fmt.Errorf("getting deployment %s/%s: %w", sib.Namespace, sib.Name, err)
		}
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas == 0 {
			continue
		}
		running++
		if !rolledOut(&dep) {
			unavailable++
			counted[client.ObjectKeyFromObject(sib)] = true
		}
	}
	unavailable += r.inflight.count(s.template.Key, s.now, counted)
	maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(s.template.Spec.Rollout.MaxUnavailable, running, true)
	if err != nil {
		return false, fmt.Errorf("resolving maxUnavailable of %s: %w", s.template.Key, err)
	}
	maxUnavailable = max(maxUnavailable, 1)
	ctrl.LoggerFrom(ctx).V(1).Info("rollout budget", "template", s.template.Key,
		"running", running, "unavailable", unavailable, "maxUnavailable", maxUnavailable)
	return unavailable < maxUnavailable, nil
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
