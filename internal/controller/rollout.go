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
	"github.com/userland-dev/userland/internal/templates"
)

// countsAgainstBudget is true of a running Deployment not rolled out: it
// takes one of its template's maxUnavailable places. freesRolloutPlace
// wakes the waiting when one stops being so.
func countsAgainstBudget(dep *appsv1.Deployment) bool {
	return dep.Spec.Replicas != nil && *dep.Spec.Replicas > 0 && !rolledOut(dep)
}

// budgetAvailable reports whether restarting one more of the template's
// running environments keeps the unavailable ones within maxUnavailable.
// Unavailable counts the other running environments whose Deployment is
// not available (from the cache) plus restarts started here that the cache
// may not show.
// When the answer is no, recheck is when the soonest of those restarts
// stops counting by expiry (zero if none does): no Deployment event may
// come to say so.
//
// Every sibling is read on every decision: O(siblings), under the lock
// that serialises decisions. What each read costs is therefore kept to a
// lookup (siblingReader).
func (r *UserlandReconciler) budgetAvailable(ctx context.Context, s *reconcileState) (ok bool, recheck time.Duration, err error) {
	running, unavailable := 0, 0
	// What the restarts in flight are judged by is kept for them alone,
	// not in maps of every sibling (at 2,000 siblings in one namespace,
	// those maps and a Deployment allocated per sibling were a third of
	// a rollout's controller CPU, with the garbage collection they made).
	tracked := r.inflight.names()
	seen := make(map[types.NamespacedName]sibling, len(tracked))
	self := client.ObjectKeyFromObject(s.ul)
	err = r.siblingReader().siblings(ctx, s.template.Key, func(key types.NamespacedName, dep *appsv1.Deployment) error {
		_, isTracked := tracked[key]
		var info sibling
		if dep != nil && dep.Spec.Replicas != nil && *dep.Spec.Replicas > 0 {
			running++
			// The deciding environment is not counted: restarting one
			// already unavailable (a broken template's, to fix it) adds
			// nothing, and counting it would leave every environment of a
			// template whose broken ones fill the budget waiting for one
			// that never comes.
			if countsAgainstBudget(dep) && key != self {
				unavailable++
				info.counted = true
			}
		}
		if isTracked {
			// The pod template is read only for these: an annotation
			// lookup per sibling was a sixth of a rollout's CPU.
			if dep != nil {
				info.shown, info.hash = true, dep.Spec.Template.Annotations[AnnotationTemplateHash]
			}
			seen[key] = info
		}
		return nil
	})
	if err != nil {
		return false, 0, err
	}
	inflight, expires := r.inflight.count(s.now, func(name types.NamespacedName, to string) bool {
		info, listed := seen[name]
		if _, known := tracked[name]; !known {
			// Recorded while the siblings were read (a WhenIdle restart of
			// any template, or one put back after a write that did not
			// happen): judged now from the cache, counted if listed here.
			info, listed = r.siblingNow(ctx, name, s.template.Key)
		}
		// Not counted here: the environment deciding (its own restart is
		// what is decided, and a write that failed must not block its
		// retry); one the cache already counts; one whose Deployment the
		// cache shows with the pod template the restart (or a later write
		// of this controller's) applied (rolledOut tells its availability
		// from then on, so a finished restart frees its place at once);
		// and one not listed under this template (another template's,
		// deleted, or moved away). One listed whose Deployment the cache
		// does not show (deleted, or its label removed) still counts.
		return name == self || info.counted || !listed || (info.shown && info.hash == to)
	})
	unavailable += inflight
	maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(s.template.Spec.Rollout.MaxUnavailable, running, true)
	if err != nil {
		return false, 0, fmt.Errorf("resolving maxUnavailable of %s: %w", s.template.Key, err)
	}
	maxUnavailable = max(maxUnavailable, 1)
	ctrl.LoggerFrom(ctx).V(1).Info("rollout budget", "template", s.template.Key,
		"running", running, "unavailable", unavailable, "maxUnavailable", maxUnavailable)
	if unavailable < maxUnavailable {
		return true, 0, nil
	}
	if !expires.IsZero() {
		recheck = expires.Sub(s.now)
	}
	return false, recheck, nil
}

// siblingReader is what budget decisions read siblings with: the cache's
// indexers when SetupWithManager could reach them, the client otherwise
// (a reconciler built without a manager, as some tests do).
func (r *UserlandReconciler) siblingReader() siblingReader {
	if r.siblings != nil {
		return r.siblings
	}
	return clientSiblings{reader: r.Client}
}

// siblingNow is what the cache shows of name's environment when a restart
// of it was recorded after the siblings were read: whether it is listed
// under template (counted, if unsure), and its Deployment's pod template.
// Whether it was counted as unavailable is not known, so it is not set:
// the restart may then count twice, which only delays.
func (r *UserlandReconciler) siblingNow(ctx context.Context, name types.NamespacedName, template string) (info sibling, listed bool) {
	var ul v1alpha1.Userland
	if err := r.Client.Get(ctx, name, &ul, client.UnsafeDisableDeepCopy); err != nil {
		return info, !apierrors.IsNotFound(err)
	}
	if templates.UserlandKey(&ul) != template {
		return info, false
	}
	var dep appsv1.Deployment
	if err := r.Client.Get(ctx, name, &dep, client.UnsafeDisableDeepCopy); err == nil {
		info.shown, info.hash = true, dep.Spec.Template.Annotations[AnnotationTemplateHash]
	}
	return info, true
}

// sibling is what a budget decision saw of a sibling with a restart in
// flight: the pod template hash of the Deployment the cache shows (if it
// shows one), and whether that Deployment was counted as unavailable.
type sibling struct {
	hash           string
	shown, counted bool
}

// rolloutTracker remembers Immediate restarts this process started and whose
// Deployment may not show in the cache yet, so concurrent reconciles never
// exceed maxUnavailable. Restarts are keyed by environment, not template:
// an environment moved to another template while its restart is in flight
// counts against the template it is listed under now.
type rolloutTracker struct {
	// decide serialises Immediate budget decisions, so two workers cannot
	// both take the last free slot.
	decide   sync.Mutex
	mu       sync.Mutex
	restarts map[types.NamespacedName]restart
}

// restart is one Immediate restart started here: when, and the hash of the
// pod template this controller last applied to its environment (the
// restart's own, or a later write's: an explicit restart, a start, a
// re-create). A Deployment the cache shows with it has been seen written.
type restart struct {
	at time.Time
	to string
}

// inflightExpiry bounds how long a restart counts against the budget if its
// environment never becomes ready (it then counts through the cache).
const inflightExpiry = 10 * time.Minute

// count is how many restarts still count, leaving out those skip says do
// not (another template's, or ones the cache accounts for), and when the
// soonest of those counted expires (zero if none is counted).
func (t *rolloutTracker) count(now time.Time, skip func(name types.NamespacedName, to string) bool) (n int, expires time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(now)
	for name, rs := range t.restarts {
		if skip != nil && skip(name, rs.to) {
			continue
		}
		n++
		if at := rs.at.Add(inflightExpiry); expires.IsZero() || at.Before(expires) {
			expires = at
		}
	}
	return n, expires
}

// names is the environments with a restart recorded now.
func (t *rolloutTracker) names() map[types.NamespacedName]struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	names := make(map[types.NamespacedName]struct{}, len(t.restarts))
	for name := range t.restarts {
		names[name] = struct{}{}
	}
	return names
}

// sweep drops expired restarts; t.mu is held.
func (t *rolloutTracker) sweep(now time.Time) {
	for name, rs := range t.restarts {
		// At the expiry itself, so a recheck timed to it finds it gone.
		if !now.Before(rs.at.Add(inflightExpiry)) {
			delete(t.restarts, name)
		}
	}
}

// add records a restart of name to the pod template of hash (one
// environment is one unavailable place). A retry of the same restart
// keeps its start, so a write refused again and again cannot hold a
// place past the expiry. It sweeps expired ones too, so restarts of
// environments whose templates never decide a budget do not pile up.
func (t *rolloutTracker) add(name types.NamespacedName, now time.Time, hash string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.restarts == nil {
		t.restarts = map[types.NamespacedName]restart{}
	}
	t.sweep(now)
	if rs, ok := t.restarts[name]; ok && rs.to == hash {
		return
	}
	t.restarts[name] = restart{at: now, to: hash}
}

// applying notes that the controller applies the pod template of hash to
// name's Deployment, whatever the path (an explicit restart, a start, a
// re-create): a restart in flight is then seen written once the cache
// shows that, not the pod template it first applied, which may never show.
func (t *rolloutTracker) applying(name types.NamespacedName, hash string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rs, ok := t.restarts[name]; ok {
		rs.to = hash
		t.restarts[name] = rs
	}
}

// done forgets name's restart once its Deployment is seen rolled out at
// the pod template it applied. Any other sighting leaves it: the cache may
// still show the pod template from before (a change reverted within the
// cache's lag), and the restart has not been seen, let alone done.
func (t *rolloutTracker) done(name types.NamespacedName, hash string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rs, ok := t.restarts[name]; ok && rs.to == hash {
		delete(t.restarts, name)
	}
}

// get returns name's restart, to be put back by restore when the write
// that followed it was refused.
func (t *rolloutTracker) get(name types.NamespacedName) (restart, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rs, ok := t.restarts[name]
	return rs, ok
}

// restore puts name's restart back as get returned it: no write followed,
// so nothing recorded since is in flight. It reports whether that changed
// anything.
func (t *rolloutTracker) restore(name types.NamespacedName, rs restart, ok bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now, had := t.restarts[name]
	if !ok {
		delete(t.restarts, name)
		return had
	}
	if t.restarts == nil {
		t.restarts = map[types.NamespacedName]restart{}
	}
	t.restarts[name] = rs
	return !had || now != rs
}

// forget drops name's restart: its environment is gone.
func (t *rolloutTracker) forget(name types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.restarts, name)
}
