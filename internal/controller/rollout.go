package controller

import (
	"context"
	"fmt"
	"slices"
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
		// An event during the count (the cache moved under it) must not
		// be undone by keeping a count read before it.
		epoch := r.inflight.epochOf(s.template.Key)
		var err error
		if counts, err = r.countSiblings(ctx, s.template.Key, s.now); err != nil {
			return false, err
		}
		r.inflight.keepCounts(s.template.Key, counts, epoch)
	}
	self := types.NamespacedName{Namespace: s.ul.Namespace, Name: s.ul.Name}
	unavailable := counts.unavailable + r.inflight.count(s.template.Key, s.now, counts, self)
	maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(s.template.Spec.Rollout.MaxUnavailable, counts.running, true)
	if err != nil {
		return false, fmt.Errorf("resolving maxUnavailable of %s: %w", s.template.Key, err)
	}
	maxUnavailable = max(maxUnavailable, 1)
	ctrl.LoggerFrom(ctx).V(1).Info("rollout budget", "template", s.template.Key,
		"running", counts.running, "unavailable", unavailable, "maxUnavailable", maxUnavailable)
	return unavailable < maxUnavailable, nil
}

// siblingCounts is a template's environments as the cache showed them at
// a time: how many run, how many of those have no available Deployment,
// and each sibling's state, which says which restarts in flight the cache
// already shows.
type siblingCounts struct {
	running, unavailable int
	siblings             map[types.NamespacedName]siblingState
	at                   time.Time
}

type siblingState struct {
	unavailable bool
	// rolledOutHash is the template hash a running, available Deployment
	// runs ("" otherwise): a restart to it is over.
	rolledOutHash string
}

// countsMaxAge bounds how long one count serves decisions when no event
// of the template's Deployments said it changed (rolloutBudgetEvents
// drops it on each): a change the events do not cover, such as a sibling
// Userland deleted while its Deployment stands, is seen within this.
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
	counts := &siblingCounts{siblings: make(map[types.NamespacedName]siblingState, len(siblings.Items)), at: now}
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
		var state siblingState
		if dep := byName[name]; dep != nil && dep.Spec.Replicas != nil && *dep.Spec.Replicas > 0 {
			counts.running++
			if rolledOut(dep) {
				state.rolledOutHash = dep.Spec.Template.Annotations[AnnotationTemplateHash]
			} else {
				state.unavailable = true
				counts.unavailable++
			}
		}
		counts.siblings[name] = state
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
// exceed maxUnavailable, and each template's last count of its siblings.
type rolloutTracker struct {
	// decide serialises Immediate budget decisions, so two workers cannot
	// both take the last free slot.
	decide   sync.Mutex
	mu       sync.Mutex
	restarts map[string]map[types.NamespacedName]restart
	// counts is each template's last count of its siblings, kept for the
	// decisions that follow until an event of its Deployments drops it;
	// epochs counts the drops, so a count read before one is not kept.
	counts map[string]*siblingCounts
	epochs map[string]uint64
}

// restart is one restart started here: when, and to which template hash.
type restart struct {
	at   time.Time
	hash string
}

// inflightExpiry bounds how long a restart counts against the budget if its
// environment never becomes ready (it then counts through the cache).
const inflightExpiry = 10 * time.Minute

// count is the restarts in flight that c does not already show: not the
// deciding environment's own (self: a retry after its write failed is not
// held up by itself), not one of an environment no longer of the template,
// not one already counted unavailable, and not one whose Deployment runs,
// available, the hash it was restarted to (over: its own reconcile, which
// clears it, may not have run yet when the siblings it woke decide).
func (t *rolloutTracker) count(template string, now time.Time, c *siblingCounts, self types.NamespacedName) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for name, rs := range t.restarts[template] {
		if now.Sub(rs.at) > inflightExpiry {
			delete(t.restarts[template], name)
			continue
		}
		state, sibling := c.siblings[name]
		if name == self || !sibling || state.unavailable || (rs.hash != "" && state.rolledOutHash == rs.hash) {
			continue
		}
		n++
	}
	return n
}

func (t *rolloutTracker) add(template string, name types.NamespacedName, now time.Time, hash string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.restarts == nil {
		t.restarts = map[string]map[types.NamespacedName]restart{}
	}
	if t.restarts[template] == nil {
		t.restarts[template] = map[types.NamespacedName]restart{}
	}
	t.restarts[template][name] = restart{at: now, hash: hash}
}

func (t *rolloutTracker) done(template string, name types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.restarts[template], name)
}

// templatesHolding is the templates that count name against their budget:
// a restart in flight, or unavailable in a kept count. A Deployment gone
// with its Userland names no template of its own; these are the ones it
// can free budget of.
func (t *rolloutTracker) templatesHolding(name types.NamespacedName) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for template, restarts := range t.restarts {
		if _, ok := restarts[name]; ok {
			out = append(out, template)
		}
	}
	for template, c := range t.counts {
		if c.siblings[name].unavailable && !slices.Contains(out, template) {
			out = append(out, template)
		}
	}
	return out
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

// epochOf is how many times template's count was dropped.
func (t *rolloutTracker) epochOf(template string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.epochs[template]
}

// keepCounts keeps c for template unless a drop came since epoch, which
// c was counted after: then c may predate the change that dropped.
func (t *rolloutTracker) keepCounts(template string, c *siblingCounts, epoch uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.epochs[template] != epoch {
		return
	}
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
	if t.epochs == nil {
		t.epochs = map[string]uint64{}
	}
	t.epochs[template]++
}
