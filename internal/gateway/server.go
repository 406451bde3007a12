// Package gateway is what users talk to: it signs them in, routes each to
// their own environment only, wakes stopped environments and records
// activity. Reads come from informer caches; the request path makes no API
// calls except the one that wakes an environment.
package gateway

import (
	"context"
	"errors"
	"html/template"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway/activity"
	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/gateway/authz"
	"github.com/userland-dev/userland/internal/gateway/dashboard"
	"github.com/userland-dev/userland/internal/gateway/provision"
	"github.com/userland-dev/userland/internal/gateway/proxy"
	"github.com/userland-dev/userland/internal/gateway/route"
	"github.com/userland-dev/userland/internal/gateway/session"
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
	// Ready reports whether the caches have synced, for /readyz.
	Ready func() bool
	// Provisioner creates Userlands at sign-in, when set.
	Provisioner *provision.Provisioner
	// Metrics records requests, wakes and sign-in failures; nil disables.
	Metrics *Metrics
	// Dashboard is the web UI at "/"; nil serves 404 there.
	Dashboard *dashboard.Dashboard

	wakingMu sync.Mutex
	// waking remembers environments this replica is waking, so the burst
	// of requests a starting app gets writes one wake, not one each. An
	// entry goes when the environment serves, or after the wake timeout.
	waking map[types.NamespacedName]time.Time

	websockets, waiting counter
	passwordChecks      gate
}

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

// Handler is the server with metrics and the access log around it.
func (s *Server) Handler(log logr.Logger) http.Handler { return observe(s, s.Metrics, log) }

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if label, err := route.LabelFromHost(r.Host, s.BaseDomain); err == nil || errors.Is(err, route.ErrInvalid) {
		if err != nil {
			http.Error(w, "invalid environment address", http.StatusBadRequest)
			return
		}
		s.serveEnvHost(w, r, label)
		return
	}
	p := r.URL.Path
	switch {
	case r.Method == http.MethodGet || r.Method == http.MethodHead || strings.HasPrefix(p, route.PathPrefix):
	case p == dashboard.ImportPath:
		// The import bounds its own (larger) upload.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(2 * formReadTimeout))
	default:
		limitForm(w, r, maxFormBytes)
	}
	switch {
	case p == "/healthz":
		_, _ = w.Write([]byte("ok"))
	case p == "/readyz":
		if s.Ready != nil && !s.Ready() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
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
		s.Sessions.Clear(w)
		http.Redirect(w, r, "/", http.StatusSeeOther)
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
			http.Error(w, "invalid environment address", http.StatusBadRequest)
		default:
			if id, ok := s.identity(w, r); ok {
				s.serveEnvironment(w, r, id, t, true)
			}
		}
	default:
		http.NotFound(w, r)
	}
}

// identity returns who is asking, or writes the response that makes them
// sign in.
func (s *Server) identity(w http.ResponseWriter, r *http.Request) (session.Identity, bool) {
	if s.Header != nil {
		id, err := s.Header.Identity(r)
		if err != nil {
			s.Metrics.signinFailed("untrusted_header")
			http.Error(w, "not authenticated", http.StatusUnauthorized)
			return session.Identity{}, false
		}
		return id, true
	}
	id, err := s.Sessions.Load(r)
	if err == nil {
		return id, true
	}
	if isNavigation(r) {
		http.Redirect(w, r, "/login?rd="+url.QueryEscape(r.URL.RequestURI()), http.StatusFound)
	} else {
		http.Error(w, "not signed in", http.StatusUnauthorized)
	}
	return session.Identity{}, false
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
		http.Error(w, "cross-origin request to an environment refused", http.StatusForbidden)
		return
	}
	key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
	ul, spec, ok := s.lookup(r.Context(), id, key)
	if !ok {
		// Not found and not allowed look the same: existence is not revealed.
		http.NotFound(w, r)
		return
	}
	subdomain := naming.Routing(spec.HTTP.Routing, s.BaseDomain != "") == v1alpha1.RoutingSubdomain
	if pathRouted == subdomain {
		http.NotFound(w, r)
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
	upstream, err := s.Resolver.Resolve(ul.Namespace, ul.Name, spec.HTTP.Port)
	if err != nil {
		http.Error(w, "environment address unknown", http.StatusBadGateway)
		return
	}
	req := proxy.Request{Upstream: upstream, Identity: id, Activity: func() { s.Activity.Touch(key) }}
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

// waitReady wakes an idle environment and waits for it: a browser gets a
// progress page that reloads itself; other requests are held up to
// WakeTimeout, then get 503 with Retry-After.
func (s *Server) waitReady(w http.ResponseWriter, r *http.Request, id session.Identity, ul *v1alpha1.Userland) (*v1alpha1.Userland, bool) {
	key := types.NamespacedName{Namespace: ul.Namespace, Name: ul.Name}
	if ul.Status.Phase == v1alpha1.PhaseStopped && ul.Status.StoppedReason == v1alpha1.StoppedSuspended {
		s.progress(w, ul, http.StatusServiceUnavailable, "This environment is suspended by its administrators, so it cannot be started from here.")
		return nil, false
	}
	timeout := s.WakeTimeout
	if timeout == 0 {
		timeout = time.Minute
	}
	if ul.Status.Phase == v1alpha1.PhaseStopped && s.shouldWake(key, timeout) {
		if err := s.Activity.Wake(r.Context(), key); err != nil {
			s.forgetWake(key)
			http.Error(w, "could not start the environment; try again", http.StatusServiceUnavailable)
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
			http.Error(w, "the environment is starting; retry shortly", http.StatusServiceUnavailable)
			return nil, false
		case <-tick.C:
		}
	}
}

var progressPage = template.Must(template.New("progress").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
{{if not .Final}}<meta http-equiv="refresh" content="2">{{end}}
<title>Starting {{.Name}}</title></head>
<body>
<h1>{{if .Final}}{{.Name}}{{else if .Failed}}Your environment cannot start{{else}}Starting your environment…{{end}}</h1>
<p>{{.Name}} in {{.Namespace}}: <strong>{{.Phase}}</strong></p>
{{with .Message}}<p>{{.}}</p>{{end}}
{{if .Failed}}<p>This page keeps checking, and continues if it recovers. Ask your instructor if it does not.</p>
{{else if not .Final}}<p>This page continues to the environment when it is ready.</p>{{end}}
</body></html>
`))

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
	}
	gatewayPageHeaders(w)
	w.WriteHeader(code)
	_ = progressPage.Execute(w, map[string]any{
		"Name": ul.Name, "Namespace": ul.Namespace, "Phase": phase, "Message": message, "Final": final != "",
		"Failed": ul.Status.Phase == v1alpha1.PhaseFailed,
	})
}

// gatewayPageHeaders mark a page the gateway itself renders: never cached,
// never framed (a hostile page must not overlay or read it).
func gatewayPageHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in — Userland</title></head>
<body><h1>Sign in</h1>
{{with .Error}}<p role="alert">{{.}}</p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="rd" value="{{.Return}}">
<label>User <input name="username" autocomplete="username" required></label>
<label>Password <input name="password" type="password" autocomplete="current-password" required></label>
<button type="submit">Sign in</button>
</form></body></html>
`))

// login shows and handles the static-users form.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.Static == nil {
		http.NotFound(w, r)
		return
	}
	if r.Method == http.MethodPost {
		// The form is read, within its limits, before anything else:
		// a body too large, too slow or not a plain form costs no bcrypt.
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
			s.Metrics.signinFailed("bad_form")
			http.Error(w, "sign-in expects a URL-encoded form", http.StatusUnsupportedMediaType)
			return
		}
		if err := r.ParseForm(); err != nil {
			s.Metrics.signinFailed("bad_form")
			formError(w, err)
			return
		}
	}
	rd := auth.SafeReturnPath(r.FormValue("rd"))
	render := func(code int, msg string) {
		gatewayPageHeaders(w)
		w.WriteHeader(code)
		_ = loginPage.Execute(w, map[string]string{"Return": rd, "Error": msg})
	}
	switch r.Method {
	case http.MethodGet:
		render(http.StatusOK, "")
	case http.MethodPost:
		// Login CSRF: a form posted from another site is refused.
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
			s.Metrics.signinFailed("cross_site")
			http.Error(w, "cross-site sign-in refused", http.StatusForbidden)
			return
		}
		wait := s.Limits.PasswordCheckWait
		if wait == 0 {
			wait = formReadTimeout
		}
		leave := s.passwordChecks.enter(r.Context(), s.Limits.PasswordChecks, wait)
		if leave == nil {
			s.Metrics.signinFailed("busy")
			w.Header().Set("Retry-After", "5")
			render(http.StatusTooManyRequests, "Too many people are signing in at once; try again in a few seconds.")
			return
		}
		id, err := s.Static.Authenticate(r.PostFormValue("username"), r.PostFormValue("password"))
		leave()
		if err != nil {
			s.Metrics.signinFailed("bad_credentials")
			render(http.StatusUnauthorized, "Wrong user name or password.")
			return
		}
		if err := s.Sessions.Save(w, id); err != nil {
			http.Error(w, "could not sign in", http.StatusInternalServerError)
			return
		}
		s.provision(r.Context(), id)
		http.Redirect(w, r, rd, http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func sameOrigin(origin string, r *http.Request) bool {
	o := strings.TrimPrefix(strings.TrimPrefix(origin, "https://"), "http://")
	return o == r.Host
}

// home serves the dashboard to a signed-in user.
func (s *Server) home(w http.ResponseWriter, r *http.Request) {
	id, ok := s.identity(w, r)
	if !ok {
		return
	}
	// Trusted-header mode has no sign-in step: the home page is where a
	// user first arrives.
	if s.Header != nil && r.URL.Path == "/" {
		s.provision(r.Context(), id)
	}
	if s.Dashboard == nil {
		http.NotFound(w, r)
		return
	}
	s.Dashboard.ServeHTTP(w, r, id)
}

// provision creates the user's Userlands; a failure is logged, not shown:
// sign-in itself succeeded, and an admin can create the Userland by hand.
func (s *Server) provision(ctx context.Context, id session.Identity) {
	if s.Provisioner == nil {
		return
	}
	if _, err := s.Provisioner.Provision(ctx, id); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "auto-provisioning")
	}
}

func (s *Server) forgetWake(key types.NamespacedName) {
	s.wakingMu.Lock()
	defer s.wakingMu.Unlock()
	delete(s.waking, key)
}

// startRemote sends the browser to the identity provider.
func (s *Server) startRemote(w http.ResponseWriter, r *http.Request) {
	flow, target := s.Provider.Start(auth.SafeReturnPath(r.FormValue("rd")))
	if err := s.Sessions.SaveFlow(w, flow); err != nil {
		http.Error(w, "could not start sign-in", http.StatusInternalServerError)
		return
	}
	http.Redirect(w, r, target, http.StatusFound)
}

// finishRemote completes the code flow the provider redirected back with.
func (s *Server) finishRemote(w http.ResponseWriter, r *http.Request) {
	flow, err := s.Sessions.TakeFlow(w, r)
	if err != nil {
		s.Metrics.signinFailed("expired")
		http.Error(w, "the sign-in expired or was started elsewhere; please sign in again", http.StatusBadRequest)
		return
	}
	if e := r.FormValue("error"); e != "" {
		s.Metrics.signinFailed("provider_error")
		http.Error(w, "the identity provider refused the sign-in: "+e, http.StatusUnauthorized)
		return
	}
	id, err := s.Provider.Finish(r.Context(), flow, r.FormValue("state"), r.FormValue("code"))
	switch {
	case errors.Is(err, auth.ErrStateMismatch):
		s.Metrics.signinFailed("state_mismatch")
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case errors.Is(err, auth.ErrNotAllowed):
		s.Metrics.signinFailed("not_allowed")
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	case err != nil:
		s.Metrics.signinFailed("exchange")
		ctrl.LoggerFrom(r.Context()).Error(err, "completing sign-in")
		http.Error(w, "sign-in failed; please try again", http.StatusBadGateway)
		return
	}
	if err := s.Sessions.Save(w, id); err != nil {
		http.Error(w, "could not sign in", http.StatusInternalServerError)
		return
	}
	s.provision(r.Context(), id)
	http.Redirect(w, r, flow.Return, http.StatusSeeOther)
}
