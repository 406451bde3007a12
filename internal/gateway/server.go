// Package gateway is what users talk to: it signs them in, routes each to
// their own environment only, wakes stopped environments and records
// activity. Reads come from informer caches; the request path makes no API
// calls except the one that wakes an environment.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway/activity"
	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/gateway/authz"
	"github.com/userland-dev/userland/internal/gateway/dashboard"
	"github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/provision"
	"github.com/userland-dev/userland/internal/gateway/proxy"
	"github.com/userland-dev/userland/internal/gateway/route"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/idle"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/templates"
)

// Server is the gateway's HTTP handler.
type Server struct {
	// Reader reads Userlands, templates and namespaces (the cache).
	Reader client.Reader
	// Sessions encodes session cookies.
	Sessions *session.Store
	// Static signs users in with a password, when set.
	Static *auth.StaticUsers
	// Header takes identities from a trusted proxy, when set; it then
	// replaces sessions entirely.
	Header *auth.TrustedHeader
	// Provider signs users in at a remote identity provider (OpenID
	// Connect or GitHub), when set.
	Provider auth.Provider
	// Policy decides access.
	Policy authz.Policy
	// Activity records use and wakes environments.
	Activity *activity.Recorder
	// Proxy forwards requests.
	Proxy *proxy.Proxy
	// Resolver finds environments' Services.
	Resolver proxy.Resolver
	// BaseDomain is the environment domain: with it, environments are
	// served on their own hosts, <label>.<BaseDomain> (naming.HostLabel),
	// each its own browser origin.
	BaseDomain string
	// PublicURL is the main host's external URL (dashboard, sign-in,
	// hand-off); environment hosts send browsers there to sign in.
	PublicURL *url.URL
	// Limits cap what one user can hold open.
	Limits Limits
	// WakeTimeout bounds how long a non-navigation request is held while
	// its environment starts (60s by default).
	WakeTimeout time.Duration
	// NavigationHold is how long a page load waits for its starting
	// environment before the progress page answers it (2s by default).
	NavigationHold time.Duration
	// Ready reports whether the caches have synced, for /readyz.
	Ready func() bool
	// Provisioner creates Userlands at sign-in, when set.
	Provisioner *provision.Provisioner
	// Metrics records requests, wakes and sign-in failures; nil disables.
	Metrics *Metrics
	// Dashboard is the web UI at "/"; nil serves 404 there.
	Dashboard *dashboard.Dashboard
	// ForwardedBy are the proxies (CIDRs) in front of the gateway whose
	// X-Forwarded-For names the client, which static sign-in throttles
	// per address; empty: the connection's address is the client's.
	ForwardedBy []netip.Prefix

	// Clock tells the time that wake decisions, messages and the sign-in
	// throttles use; nil is the real clock. Latency metrics always use the
	// real one.
	Clock clock.PassiveClock

	// idleRules holds each template's compiled activity rules.
	idleRules idle.Cache

	wakingMu sync.Mutex
	// waking remembers environments this replica is waking, so the burst
	// of requests a starting app gets writes one wake, not one each. An
	// entry goes when the environment serves, or after the wake timeout.
	waking map[types.NamespacedName]time.Time

	websockets, waiting counter
	passwordChecks      gate
	signin              signinThrottles
}

// CacheOptions are the informer cache settings of every gateway (the
// manager's, and the tests', so that what is tested is what ships).
func CacheOptions() cache.Options {
	managed := labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		// Every request reads a Userland, its namespace and its template:
		// copying them per request would cost more than proxying a small
		// response. So nothing may change what it reads: whoever needs to
		// changes a DeepCopy, and actions build new objects to patch
		// (TestSignInAndActionsLeaveTheCacheAlone runs it all under -race).
		DefaultUnsafeDisableDeepCopy: ptr.To(true),
		ByObject: map[client.Object]cache.ByObject{
			// Only environments' slices: the Services the controller
			// labels, whose labels their slices copy.
			&discoveryv1.EndpointSlice{}: {Label: managed},
			// Only their metadata: which Userland controls each (a
			// recreated name's slices are told from the old Service's).
			ServiceMetadata(): {Label: managed},
		},
	}
}

// Watched are the kinds the request path reads from the cache; the
// manager starts their informers before it serves.
func Watched() []client.Object {
	return []client.Object{&v1alpha1.Userland{}, &v1alpha1.Template{}, &v1alpha1.ClusterTemplate{}, &v1alpha1.Course{}, &corev1.Namespace{}, &discoveryv1.EndpointSlice{}, ServiceMetadata()}
}

// harden applies the options that keep other credentials from
// environments and sign-in floods in bounds; NewServer calls it once the
// proxy is built.
func (s *Server) harden(opts Options) error {
	names := slices.Clone(opts.DropCookies)
	header := opts.AuthMode == "header"
	if header && !opts.ForwardOAuth2ProxyCookies {
		names = append(names, proxy.OAuth2ProxyCookies...)
	}
	drop, err := proxy.ParseCookieNames(names)
	if err != nil {
		return fmt.Errorf("--drop-cookies: %w", err)
	}
	s.Proxy.DropCookies = drop
	s.Proxy.DropAuthorization = header && !opts.ForwardAuthorization
	for _, c := range opts.ForwardedBy {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return fmt.Errorf("--forwarded-by %q: %w", c, err)
		}
		s.ForwardedBy = append(s.ForwardedBy, p)
	}
	return nil
}

// Handler is the server with metrics and the access log around it.
func (s *Server) Handler(log logr.Logger) http.Handler { return observe(s, s.Metrics, log) }

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.boundBody(w, r)
	if label, err := route.LabelFromHost(r.Host, s.BaseDomain); err == nil || errors.Is(err, route.ErrInvalid) {
		if err != nil {
			pages.Error(w, r, http.StatusBadRequest, "invalid environment address")
			return
		}
		s.serveEnvHost(w, r, label)
		return
	}
	p := r.URL.Path
	switch {
	case r.Method == http.MethodGet || r.Method == http.MethodHead || strings.HasPrefix(p, route.PathPrefix):
	case p == dashboard.ImportPath || p == dashboard.CoursePath:
		// The imports (the admin's, and a course page's roster) bound
		// their own larger uploads (2 MiB): 64 KiB cut a course roster
		// off at about 1,400 students.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(2 * formReadTimeout))
	default:
		limitForm(w, r, maxFormBytes)
	}
	switch {
	case p == "/healthz":
		_, _ = w.Write([]byte("ok"))
	case p == "/readyz":
		if s.Ready != nil && !s.Ready() {
			pages.Error(w, r, http.StatusServiceUnavailable, "caches not synced")
			return
		}
		_, _ = w.Write([]byte("ok"))
	case p == "/login" && s.Provider != nil:
		s.startRemote(w, r)
	case p == "/oauth2/callback" && s.Provider != nil:
		s.finishRemote(w, r)
	case p == "/login":
		s.login(w, r)
	case p == "/logout":
		s.logout(w, r)
	case p == HandoffPath:
		s.handoff(w, r)
	case strings.HasPrefix(p, dashboard.StaticPath):
		dashboard.Static().ServeHTTP(w, r)
	case dashboard.Owns(p):
		s.home(w, r)
	case strings.HasPrefix(r.URL.EscapedPath(), route.PathPrefix):
		t, err := route.FromPath(r.URL.EscapedPath())
		switch {
		case errors.Is(err, route.ErrNeedsSlash):
			http.Redirect(w, r, t.Prefix+"/", http.StatusFound)
		case err != nil:
			pages.Error(w, r, http.StatusBadRequest, "invalid environment address")
		default:
			if id, ok := s.identity(w, r); ok {
				s.serveEnvironment(w, r, id, t, true)
			}
		}
	default:
		pages.NotFound(w, r)
	}
}

// isNavigation tells a browser loading a page from XHR, fetch and
// WebSocket requests, which get status codes rather than pages.
func isNavigation(r *http.Request) bool {
	if r.Method != http.MethodGet || r.Header.Get("Upgrade") != "" {
		return false
	}
	if mode := r.Header.Get("Sec-Fetch-Mode"); mode != "" {
		return mode == "navigate"
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// serveEnvironment authorises, wakes if needed, and proxies.
func (s *Server) serveEnvironment(w http.ResponseWriter, r *http.Request, id session.Identity, t route.Target, pathRouted bool) {
	// A page of another origin (another environment, any site) must not
	// drive this one as the viewer: refused before any look-up or dial.
	if s.crossSite(r) {
		pages.Error(w, r, http.StatusForbidden, "cross-origin request to an environment refused")
		return
	}
	key := t.NamespacedName
	ul, spec, ok := s.lookup(r.Context(), id, key)
	if !ok {
		// Not found and not allowed look the same: existence is not revealed.
		pages.NotFound(w, r)
		return
	}
	subdomain := naming.Routing(spec.HTTP.Routing, s.BaseDomain != "") == v1alpha1.RoutingSubdomain
	if pathRouted == subdomain {
		pages.NotFound(w, r)
		return
	}
	if ul.Status.Phase != v1alpha1.PhaseReady {
		if ul, ok = s.waitReady(w, r, id, ul); !ok {
			return
		}
	}
	// Once it serves, a wake is no longer in flight: should it stop again,
	// the next request wakes it again at once.
	s.forgetWake(key)
	upstream, err := s.Resolver.Resolve(r.Context(), ul.Namespace, ul.Name, ul.UID, spec.HTTP.Port)
	if err != nil {
		s.unresolved(w, r, ul, err)
		return
	}
	req := proxy.Request{Upstream: upstream, Identity: id, Rules: s.idleRules.Get(spec.Idle),
		Activity: func(source v1alpha1.ActivitySource) { s.Activity.Touch(key, ul.UID, source) }}
	switch {
	case !pathRouted:
		req.Path = r.URL.EscapedPath()
	case spec.HTTP.StripPrefix == nil || *spec.HTTP.StripPrefix:
		req.Path, req.Prefix, req.CookiePath = t.Rest, t.Prefix, t.Prefix
	default:
		req.Path, req.CookiePath = r.URL.EscapedPath(), t.Prefix
	}
	upgrade := r.Header.Get("Upgrade") != ""
	if upgrade {
		if !s.websockets.acquire(id.User, s.Limits.WebSocketsPerUser) {
			tooMany(w, "connections", 10*time.Second)
			return
		}
		s.Metrics.websocket(1)
	}
	// Passed on: the environment reads the body at its own pace.
	unboundBody(w)
	start := time.Now()
	// An upgraded connection outlives this handler; Done marks its end.
	req.Done = func() {
		if upgrade {
			s.websockets.release(id.User)
			s.Metrics.websocket(-1)
		}
		s.Metrics.proxied(time.Since(start), upgrade)
	}
	s.Proxy.ServeHTTP(w, r, req)
}

// lookup returns the Userland and its template spec when id may reach it.
func (s *Server) lookup(ctx context.Context, id session.Identity, key types.NamespacedName) (*v1alpha1.Userland, *v1alpha1.TemplateSpec, bool) {
	ul, _ := s.Policy.Check(ctx, s.Reader, id, key)
	if ul == nil {
		return nil, nil, false
	}
	t, err := templates.Resolve(ctx, s.Reader, ul)
	if err != nil {
		return nil, nil, false
	}
	return ul, t.Spec, true
}

// home serves the dashboard to a signed-in user.
func (s *Server) home(w http.ResponseWriter, r *http.Request) {
	id, ok := s.identity(w, r)
	if !ok {
		return
	}
	// Trusted-header mode has no sign-in step: the home page is where a
	// user first arrives.
	if !s.authenticator().SignsIn() && r.URL.Path == "/" {
		s.provision(r.Context(), id)
	}
	if s.Dashboard == nil {
		pages.NotFound(w, r)
		return
	}
	s.Dashboard.ServeHTTP(w, r, id)
}
