package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/route"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/naming"
)

// Paths of the hand-off between the main host and environment hosts.
const (
	// HandoffPath, on the main host, checks access and sends the browser
	// back to the environment host with a token.
	HandoffPath = "/handoff"
	// RedeemPath, on an environment host, trades the token for that
	// host's own cookie. The gateway answers it; the environment never
	// sees it.
	RedeemPath = "/.userland/handoff"
)

// HostIndex is the cache index of Userlands by host label
// (naming.HostLabel), through which an environment host finds its Userland.
const HostIndex = "userland.dev/host-label"

// AddIndexes adds the gateway's cache indexes, HostIndex and
// ServiceIndex; call it before the cache starts.
func AddIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &v1alpha1.Userland{}, HostIndex, func(o client.Object) []string {
		return []string{naming.HostLabel(o.GetNamespace(), o.GetName())}
	}); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &discoveryv1.EndpointSlice{}, ServiceIndex, serviceOfSlice)
}

// userlandForLabel finds the Userland a host label names. A readable label
// ("<name>--<namespace>") names it outright, so it is not read here: every
// caller goes on to the access check (authz.Policy.Check), which reads it
// once and answers a missing one like a forbidden one. Only a hashed label
// needs the index. Either way the label must be the one naming.HostLabel
// gives the Userland.
func (s *Server) userlandForLabel(ctx context.Context, label string) (types.NamespacedName, bool) {
	if name, namespace, ok := strings.Cut(label, "--"); ok {
		if naming.HostLabel(namespace, name) != label {
			return types.NamespacedName{}, false
		}
		return types.NamespacedName{Namespace: namespace, Name: name}, true
	}
	var list v1alpha1.UserlandList
	if err := s.Reader.List(ctx, &list, client.MatchingFields{HostIndex: label}); err != nil || len(list.Items) != 1 {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: list.Items[0].Namespace, Name: list.Items[0].Name}, true
}

// serveEnvHost serves a request to an environment host: the hand-off's
// redemption, or the environment itself for a holder of this host's cookie.
// Without one, a browser is sent to the main host to sign in and come back.
func (s *Server) serveEnvHost(w http.ResponseWriter, r *http.Request, label string) {
	if r.URL.Path == RedeemPath {
		s.redeem(w, r, label)
		return
	}
	key, found := s.userlandForLabel(r.Context(), label)
	var id session.Identity
	err := session.ErrNoSession
	if a := s.authenticator(); found || !a.SignsIn() {
		id, err = a.Identify(r, &key)
	}
	if errors.Is(err, errUntrusted) {
		s.Metrics.signinFailed("untrusted_header")
		pages.Error(w, r, http.StatusUnauthorized, "not authenticated")
		return
	}
	if err != nil {
		// Whether the host names an environment is not revealed before
		// sign-in: the main host answers 404 after it.
		if !isNavigation(r) || s.PublicURL == nil {
			pages.Error(w, r, http.StatusUnauthorized, "not signed in")
			return
		}
		s.startHandoff(w, r)
		return
	}
	if !found {
		pages.NotFound(w, r)
		return
	}
	s.serveEnvironment(w, r, id, route.Target{NamespacedName: key}, false)
}

// startHandoff sets the nonce cookie and sends the browser to the main
// host's hand-off.
func (s *Server) startHandoff(w http.ResponseWriter, r *http.Request) {
	nonce, err := s.Sessions.NewNonce(w)
	if err != nil {
		pages.Error(w, r, http.StatusInternalServerError, "could not start sign-in")
		return
	}
	q := url.Values{"host": {r.Host}, "rd": {r.URL.RequestURI()}, "nonce": {nonce}}
	http.Redirect(w, r, s.PublicURL.JoinPath(HandoffPath).String()+"?"+q.Encode(), http.StatusFound)
}

// handoff, on the main host, checks that the signed-in user may reach the
// environment host asked for and sends the browser there with a token.
func (s *Server) handoff(w http.ResponseWriter, r *http.Request) {
	if s.BaseDomain == "" || !s.authenticator().SignsIn() {
		pages.NotFound(w, r)
		return
	}
	host := r.FormValue("host")
	label, err := route.LabelFromHost(host, s.BaseDomain)
	if err != nil || strings.ContainsAny(host, "/?#@\\") {
		pages.Error(w, r, http.StatusBadRequest, "invalid environment address")
		return
	}
	nonce := r.FormValue("nonce")
	if nonce == "" || len(nonce) > 64 {
		pages.Error(w, r, http.StatusBadRequest, "invalid sign-in request")
		return
	}
	id, expires, err := s.Sessions.LoadSession(r)
	if err != nil {
		http.Redirect(w, r, "/login?rd="+url.QueryEscape(r.URL.RequestURI()), http.StatusFound)
		return
	}
	key, found := s.userlandForLabel(r.Context(), label)
	if !found {
		pages.NotFound(w, r)
		return
	}
	if ul, _ := s.Policy.Check(r.Context(), s.Reader, id, key); ul == nil {
		pages.NotFound(w, r)
		return
	}
	token, err := s.Sessions.IssueHandoff(id, expires, key, host, nonce)
	if err != nil {
		pages.Error(w, r, http.StatusInternalServerError, "could not sign in to the environment")
		return
	}
	target := url.URL{Scheme: s.PublicURL.Scheme, Host: host, Path: RedeemPath,
		RawQuery: url.Values{"token": {token}, "rd": {auth.SafeReturnPath(r.FormValue("rd"))}}.Encode()}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, target.String(), http.StatusSeeOther)
}

// redeem, on an environment host, trades a hand-off token for the host's
// cookie and continues to where the user was going.
func (s *Server) redeem(w http.ResponseWriter, r *http.Request, label string) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		pages.Error(w, r, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	env, err := s.Sessions.RedeemHandoff(w, r, r.Host, r.FormValue("token"))
	if err != nil {
		s.Metrics.signinFailed("handoff")
		pages.Error(w, r, http.StatusBadRequest, "this sign-in link has expired or was already used; open the environment again")
		return
	}
	if key, ok := s.userlandForLabel(r.Context(), label); !ok || key.Namespace != env.Namespace || key.Name != env.Name {
		s.Sessions.ClearEnv(w)
		pages.NotFound(w, r)
		return
	}
	http.Redirect(w, r, auth.SafeReturnPath(r.FormValue("rd")), http.StatusSeeOther)
}

// crossSite reports a request into an environment that another site's
// page made, which must not reach it as the viewer. Two rules:
//
//   - Fetch Metadata (every current browser sends Sec-Fetch-*): from
//     another site only a top-level GET navigation is let through, as a
//     link would be; a cross-site fetch, image, script, frame or form post
//     is refused, so another environment's page cannot even make one
//     request into this one (resource isolation).
//   - Origin: a WebSocket upgrade or state-changing request whose Origin is
//     neither the request's own origin nor the main host is refused, for
//     browsers without Fetch Metadata. A request with neither header is
//     not from a page, so it carries no ambient credential worth forging.
func (s *Server) crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin":
		// The browser says the page is this origin's own. Origin may then
		// be "null": Chromium sends that on a form post from a page whose
		// Referrer-Policy is no-referrer (phpMyAdmin's sign-in form).
		// Pages cannot set Sec- headers, and an opaque origin (sandboxed
		// frame, data: URL) is never same-origin.
		return false
	case "cross-site", "same-site":
		topLevel := r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document"
		if !topLevel || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
			return !s.fromMainHost(r)
		}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if r.Header.Get("Upgrade") == "" {
			return false
		}
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	o, err := url.Parse(origin)
	if err != nil || o.Host == "" || (o.Scheme != "http" && o.Scheme != "https") {
		return true // "null" (sandboxed frames, data: URLs) included
	}
	if strings.EqualFold(o.Host, r.Host) && (s.PublicURL == nil || o.Scheme == s.PublicURL.Scheme) {
		return false
	}
	return !s.fromMainHost(r)
}

// fromMainHost reports a request whose Origin is the main host: the
// dashboard's pages may post into an environment (none do today, but the
// main host is trusted as the environment's own origin is).
func (s *Server) fromMainHost(r *http.Request) bool {
	o, err := url.Parse(r.Header.Get("Origin"))
	return err == nil && s.PublicURL != nil && o.Scheme == s.PublicURL.Scheme && strings.EqualFold(o.Host, s.PublicURL.Host)
}
