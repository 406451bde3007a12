package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/budgetsource"
	"github.com/userland-dev/userland/internal/describe"
	"github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// now is the server clock's time.
func (s *Server) now() time.Time {
	if s.Clock == nil {
		return time.Now()
	}
	return s.Clock.Now()
}

// shouldWake reports whether key needs a wake write now, and notes it.
func (s *Server) shouldWake(key types.NamespacedName, window time.Duration) bool {
	now := s.now()
	s.wakingMu.Lock()
	defer s.wakingMu.Unlock()
	if at, ok := s.waking[key]; ok && now.Sub(at) < window {
		return false
	}
	if s.waking == nil {
		s.waking = map[types.NamespacedName]time.Time{}
	}
	for k, at := range s.waking {
		if now.Sub(at) >= window {
			delete(s.waking, k)
		}
	}
	s.waking[key] = now
	return true
}

func (s *Server) forgetWake(key types.NamespacedName) {
	s.wakingMu.Lock()
	defer s.wakingMu.Unlock()
	delete(s.waking, key)
}

// waitReady wakes an idle environment and waits for it: a page load is
// held up to NavigationHold, then gets a progress page that reloads
// itself; other requests are held up to WakeTimeout, then get 503 with
// Retry-After.
func (s *Server) waitReady(w http.ResponseWriter, r *http.Request, id session.Identity, ul *v1alpha1.Userland) (*v1alpha1.Userland, bool) {
	key := types.NamespacedName{Namespace: ul.Namespace, Name: ul.Name}
	if ul.Status.Phase == v1alpha1.PhaseStopped && ul.Status.StoppedReason == v1alpha1.StoppedSuspended {
		why := "It was stopped from the dashboard. Start it there, under your environments."
		if actions.SuspendedByStaff(ul) {
			why = "An administrator or instructor suspended it, so only they can start it again."
		}
		s.progress(w, ul, http.StatusServiceUnavailable, why)
		return nil, false
	}
	if why := describe.CourseHold(ul); why != "" {
		// The course, not traffic, decides: waking would change nothing.
		s.progress(w, ul, http.StatusServiceUnavailable, why)
		return nil, false
	}
	if why := s.budgetHold(r.Context(), ul); why != "" {
		// Waking would be refused until the reset or a grant; recording
		// the ask would start it by itself once either comes.
		s.progress(w, ul, http.StatusServiceUnavailable, why)
		return nil, false
	}
	timeout := s.WakeTimeout
	if timeout == 0 {
		timeout = time.Minute
	}
	// A queued environment has asked already; asking again would only
	// move it back in line.
	queued := ul.Status.StoppedReason == v1alpha1.StoppedQueued
	if ul.Status.Phase == v1alpha1.PhaseStopped && !queued && s.shouldWake(key, timeout) {
		if err := s.Activity.Wake(r.Context(), key, ul.UID); err != nil {
			s.forgetWake(key)
			pages.Error(w, r, http.StatusServiceUnavailable, "could not start the environment; try again")
			return nil, false
		}
		s.Metrics.woke()
	}
	if !s.waiting.acquire(id.User, s.Limits.WaitingPerUser) {
		if isNavigation(r) {
			s.progress(w, ul, http.StatusAccepted, "")
		} else {
			tooMany(w, "requests waiting for an environment", 5*time.Second)
		}
		return nil, false
	}
	defer s.waiting.release(id.User)
	s.Metrics.holding(1)
	defer s.Metrics.holding(-1)
	start := time.Now()
	defer func() { s.Metrics.waited(time.Since(start)) }()
	if isNavigation(r) {
		// A page load is held briefly: a start that finishes within it
		// shows the environment itself, with no progress page and no
		// reload to wait for. Past it the progress page answers, and its
		// reload a second later is held again, so the page is shown the
		// moment the environment is Ready rather than at the next reload.
		hold := s.NavigationHold
		if hold == 0 {
			hold = defaultNavigationHold
		}
		cur, ready := s.awaitReady(r.Context(), key, ul.UID, hold, true)
		if ready {
			return cur, true
		}
		// The state the request found explains an idle stop ("your files
		// were kept"); a failure since then explains itself.
		if cur == nil || ul.Status.Phase == v1alpha1.PhaseStopped && cur.Status.Phase != v1alpha1.PhaseFailed {
			cur = ul
		}
		s.progress(w, cur, http.StatusAccepted, "")
		return nil, false
	}
	cur, ready := s.awaitReady(r.Context(), key, ul.UID, timeout, false)
	if !ready {
		if r.Context().Err() == nil {
			w.Header().Set("Retry-After", "5")
			pages.Error(w, r, http.StatusServiceUnavailable, "the environment is starting; retry shortly")
		}
		return nil, false
	}
	return cur, true
}

// defaultNavigationHold is how long a page load waits for a starting
// environment before the progress page answers it: about what a page
// load may take before it feels broken.
const defaultNavigationHold = 2 * time.Second

// awaitReady polls the in-memory cache, not the API server, until key is
// Ready or timeout passes, or, with stopOnFailed, it fails (a page load
// then shows why at once; a held request waits on, as a crashing pod may
// yet come up). It returns the last state seen. Only the Userland with
// uid, the one the request was authorised for, counts: one deleted while
// its user waited and created again under its name (another user's) ends
// the wait with nothing, so the request is neither shown nor sent to it.
func (s *Server) awaitReady(ctx context.Context, key types.NamespacedName, uid types.UID, timeout time.Duration, stopOnFailed bool) (*v1alpha1.Userland, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last *v1alpha1.Userland
	for {
		var cur v1alpha1.Userland
		if err := s.Reader.Get(ctx, key, &cur); err == nil {
			if cur.UID != uid {
				return nil, false
			}
			last = &cur
			if cur.Status.Phase == v1alpha1.PhaseReady {
				return last, true
			}
			if stopOnFailed && cur.Status.Phase == v1alpha1.PhaseFailed {
				return last, false
			}
		}
		select {
		case <-ctx.Done():
			return last, false
		case <-tick.C:
		}
	}
}

func (s *Server) progress(w http.ResponseWriter, ul *v1alpha1.Userland, code int, final string) {
	phase := string(ul.Status.Phase)
	if phase == "" || phase == string(v1alpha1.PhaseStopped) && final == "" {
		phase = "Starting"
	}
	message := final
	if message == "" {
		message = describe.Waiting(ul, s.now())
	}
	pages.RenderProgress(w, code, pages.Progress{
		Frame:       pages.Frame{Home: s.dashboardURL()},
		Environment: describe.Title(ul), Owner: ul.Spec.User,
		Phase: phase, Message: message, Final: final != "",
		Failed: ul.Status.Phase == v1alpha1.PhaseFailed,
	})
}

// dashboardURL is the dashboard's address: on an environment host "/" is the
// environment's own.
func (s *Server) dashboardURL() string {
	if s.PublicURL == nil {
		return "/"
	}
	return s.PublicURL.JoinPath("/").String()
}

// unresolvedPatience is how long after an environment turned Ready a
// missing address is still "starting": the slice follows in well under a
// second, and seconds on a loaded node.
const unresolvedPatience = 2 * time.Minute

// unresolved answers a request for a Ready environment whose address err
// says cannot be had. The controller may call an environment Ready from its
// pod a moment before Kubernetes' EndpointSlice controller lists that pod
// as ready, and on a loaded node the gap can outlast the resolver's wait:
// a dead-end 502 then strands a person whose environment is seconds from
// serving (it happened on the real node after a wake, and the idle stop
// that followed, with nobody let in, stopped it again). So a missing
// address is "starting": a page load gets the progress page, which reloads
// and is held again, and anything else a 503 to retry. Only an address that
// cannot be trusted (several ready pods), or one missing for minutes
// after the environment turned Ready (unresolvedPatience), is a 502.
func (s *Server) unresolved(w http.ResponseWriter, r *http.Request, ul *v1alpha1.Userland, err error) {
	log := ctrl.LoggerFrom(r.Context()).WithValues("namespace", ul.Namespace, "name", ul.Name)
	if !errors.Is(err, ErrNoReadyEndpoint) {
		log.Error(err, "no address for an environment")
		pages.Error(w, r, http.StatusBadGateway, "environment address unknown")
		return
	}
	if ready := meta.FindStatusCondition(ul.Status.Conditions, v1alpha1.ConditionReady); ready != nil && ready.Status == metav1.ConditionTrue &&
		s.now().Sub(ready.LastTransitionTime.Time) > unresolvedPatience {
		// Ready for minutes with no address: the slice is not merely late
		// (the Service replaced, the EndpointSlice controller down), and a
		// page that reloads forever would hide it.
		log.Error(err, "a Ready environment has had no ready address for minutes", "readySince", ready.LastTransitionTime.Time)
		pages.Error(w, r, http.StatusBadGateway, "environment address unknown")
		return
	}
	log.Info("a Ready environment has no ready address yet; the person is asked to wait", "error", err.Error())
	s.Metrics.unresolvedReady()
	if isNavigation(r) {
		s.progress(w, ul, http.StatusAccepted, "")
		return
	}
	w.Header().Set("Retry-After", "2")
	pages.Error(w, r, http.StatusServiceUnavailable, "the environment is starting; retry shortly")
}

// budgetHold is describe.BudgetHold for ul, with whose budget it is read
// through the cache only when ul is held by one.
func (s *Server) budgetHold(ctx context.Context, ul *v1alpha1.Userland) string {
	if !describe.HeldByBudget(ul) {
		return ""
	}
	src, err := budgetsource.Of(ctx, s.Reader, ul)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "reading whose budget holds an environment", "namespace", ul.Namespace, "name", ul.Name)
	}
	return describe.BudgetHold(ul, src.Course != nil)
}
