package gateway

import (
	"errors"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/types"

	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// Authenticator says who sent a request. Both kinds of host call it, once
// per request: the main host (dashboard, paths) and environment hosts.
type Authenticator interface {
	// Identify returns the identity r carries. env is the environment a
	// request to an environment host is for, nil on the main host: an
	// environment host's session cookie is good for that environment
	// only.
	Identify(r *http.Request, env *types.NamespacedName) (session.Identity, error)
	// SignsIn reports whether people sign in at the gateway (static
	// users, OpenID Connect, GitHub) and then carry a session cookie.
	// False when a trusted proxy in front asserts every request's
	// identity: there is no sign-in, hand-off or session.
	SignsIn() bool
}

// errUntrusted is a header-mode request whose identity headers did not
// come from the trusted proxy: refused, never sent to sign in.
var errUntrusted = errors.New("identity headers not from the trusted proxy")

// headerAuthenticator takes each request's identity from the trusted
// proxy's headers.
type headerAuthenticator struct{ header *auth.TrustedHeader }

func (a headerAuthenticator) Identify(r *http.Request, _ *types.NamespacedName) (session.Identity, error) {
	id, err := a.header.Identity(r)
	if err != nil {
		return session.Identity{}, fmt.Errorf("%w: %w", errUntrusted, err)
	}
	return id, nil
}

func (headerAuthenticator) SignsIn() bool { return false }

// sessionAuthenticator reads the session cookie that signing in (static
// users, OpenID Connect, GitHub) or a hand-off set.
type sessionAuthenticator struct{ sessions *session.Store }

func (a sessionAuthenticator) Identify(r *http.Request, env *types.NamespacedName) (session.Identity, error) {
	if env == nil {
		return a.sessions.Load(r)
	}
	return a.sessions.LoadEnv(r, *env)
}

func (sessionAuthenticator) SignsIn() bool { return true }

// authenticator is the server's, by its sign-in mode: a trusted header
// replaces sessions entirely.
func (s *Server) authenticator() Authenticator {
	if s.Header != nil {
		return headerAuthenticator{s.Header}
	}
	return sessionAuthenticator{s.Sessions}
}
