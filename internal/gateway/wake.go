package gateway

import (
	"context"

	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/gateway/dashboard"
	"github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// shouldWake reports whether key needs a wake write now, and notes it.
func (s *Server) shouldWake(key types.NamespacedName, window time.Duration) bool {
	s.wakingMu.Lock()
	defer s.wakingMu.Unlock()
	if at, ok := s.waking[key]; ok && time.Since(at) < window {
		return false
	}
	if s.waking == nil {
		s.waking = map[types.NamespacedName]time.Time{}
	}
	for k, at := range s.waking {
		if time.Since(at) >= window {
			delete(s.waking, k)
		}
	}
	s.waking[key] = time.Now()
	return true
}

func (s *Server) forgetWake(key types.NamespacedName) {
	s.wakingMu.Lock()
	defer s.wakingMu.Unlock()
	delete(s.waking, key)
}

// waitReady wakes an idle environment and waits for it: a browser gets a
// progress page that reloads itself; other requests are held up to
// WakeTimeout, then get 503 with Retry-After.
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
	timeout := s.WakeTimeout
	if timeout == 0 {
		timeout = time.Minute
	}
	if ul.Status.Phase == v1alpha1.PhaseStopped && s.shouldWake(key, timeout) {
		if err := s.Activity.Wake(r.Context(), key); err != nil {
			s.forgetWake(key)
			pages.Error(w, r, http.StatusServiceUnavailable, "could not start the environment; try again")
			return nil, false
		}
		s.Metrics.woke()
	}
	if isNavigation(r) {
		s.progress(w, ul, http.StatusAccepted, "")
		return nil, false
	}
	if !s.waiting.acquire(id.User, s.Limits.WaitingPerUser) {
		tooMany(w, "requests waiting for an environment", 5*time.Second)
		return nil, false
	}
	defer s.waiting.release(id.User)
	s.Metrics.holding(1)
	defer s.Metrics.holding(-1)
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	start := time.Now()
	defer func() { s.Metrics.waited(time.Since(start)) }()
	// Polls the in-memory cache, not the API server.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var cur v1alpha1.Userland
		if err := s.Reader.Get(ctx, key, &cur); err == nil && cur.Status.Phase == v1alpha1.PhaseReady {
			return &cur, true
		}
		select {
		case <-ctx.Done():
			w.Header().Set("Retry-After", "5")
			pages.Error(w, r, http.StatusServiceUnavailable, "the environment is starting; retry shortly")
			return nil, false
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
		if c := meta.FindStatusCondition(ul.Status.Conditions, v1alpha1.ConditionReady); c != nil && ul.Status.Phase == v1alpha1.PhaseFailed {
			message = c.Message
		}
		if ul.Status.Phase == v1alpha1.PhaseStopped && ul.Status.StoppedReason == v1alpha1.StoppedIdle {
			message = idleStoppedMessage(ul, time.Now())
		}
	}
	if message == "" && phase == string(v1alpha1.PhaseStarting) {
		message = startingMessage(ul)
	}
	pages.RenderProgress(w, code, pages.Progress{
		Frame:       pages.Frame{Home: s.dashboardURL()},
		Environment: dashboard.Title(ul), Owner: ul.Spec.User,
		Phase: phase, Message: message, Final: final != "",
		Failed: ul.Status.Phase == v1alpha1.PhaseFailed,
	})
}

// startingMessage is the controller's own word on a start in progress,
// when it has one.
func startingMessage(ul *v1alpha1.Userland) string {
	if c := meta.FindStatusCondition(ul.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
		return c.Message
	}
	return ""
}

// idleStoppedMessage tells a user coming back why they wait.
func idleStoppedMessage(ul *v1alpha1.Userland, now time.Time) string {
	since := ""
	if t := ul.Status.LastActivityTime; t != nil {
		since = " since " + now.Sub(t.Time).Round(time.Minute).String() + " ago"
		since = strings.Replace(since, "m0s", "m", 1)
	}
	return "It was stopped because nobody had used it" + since + ", to free the cluster for others. " +
		"It is starting again now; your files were kept."
}

// dashboardURL is the dashboard's address: on an environment host "/" is the
// environment's own.
func (s *Server) dashboardURL() string {
	if s.PublicURL == nil {
		return "/"
	}
	return s.PublicURL.JoinPath("/").String()
}
