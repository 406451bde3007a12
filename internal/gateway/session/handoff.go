package session

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/securecookie"
	"k8s.io/apimachinery/pkg/types"
)

// Cookies and tokens of environment hosts. With subdomain routing every
// environment is its own origin, so the main host's session cookie never
// reaches it. Instead the main host, after its access check, hands the
// browser a short-lived signed token bound to one environment host and to a
// nonce cookie that host set; the environment host trades it for its own
// host-only cookie, valid for that one environment only.
const (
	// envCookie is the environment host's session cookie. With Secure
	// cookies it gets the __Host- prefix: the browser then refuses it unless
	// it is host-only, Secure and Path=/, so a sibling host cannot plant one.
	envCookie = "userland_env"
	// nonceCookie binds a hand-off to the browser that asked for it.
	nonceCookie = "userland_handoff"
	// hostPrefix is the cookie-name prefix browsers enforce as host-only.
	hostPrefix = "__Host-"
	// HandoffTTL bounds how long a hand-off token is valid: one redirect.
	HandoffTTL = time.Minute
	// nonceTTL bounds how long a sign-in may take before the nonce expires.
	nonceTTL = 10 * time.Minute
	// handoffName is the securecookie name that keeps tokens apart from
	// cookies encoded with the same keys.
	handoffName = "userland_handoff_token"
)

// CookieNames are every cookie the gateway sets, under every prefix: what
// an environment never sees in requests and can never set in responses.
func CookieNames() []string {
	return []string{
		CookieName, FlowCookieName, envCookie, nonceCookie,
		hostPrefix + CookieName, hostPrefix + FlowCookieName, hostPrefix + envCookie, hostPrefix + nonceCookie,
	}
}

// handoff is a token's content.
type handoff struct {
	Identity
	Env types.NamespacedName `json:"t"`
	// Host is the environment host the token may be redeemed on.
	Host string `json:"h"`
	// Nonce must equal the nonce cookie on that host.
	Nonce string `json:"o"`
	// SessionExpires is when the main session ends; the environment
	// cookie ends then too.
	SessionExpires int64 `json:"s"`
	// Expires bounds the token itself.
	Expires int64 `json:"x"`
	// ID makes the token single-use on a replica.
	ID string `json:"i"`
}

// envPayload is the environment cookie's content.
type envPayload struct {
	Identity
	Env     types.NamespacedName `json:"t"`
	Expires int64                `json:"x"`
}

// ErrHandoff means a hand-off token is invalid, expired, already used, for
// another host or for another browser.
var ErrHandoff = errors.New("the sign-in hand-off is invalid or expired")

// redeemed remembers used token IDs until they expire, so a token is
// single-use on each replica. Across replicas a replay would also need the
// victim's nonce cookie, which is cleared on redemption.
type redeemed struct {
	mu  sync.Mutex
	ids map[string]int64
}

func (r *redeemed) first(id string, expires, now int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil {
		r.ids = map[string]int64{}
	}
	for k, x := range r.ids {
		if x <= now {
			delete(r.ids, k)
		}
	}
	if _, used := r.ids[id]; used {
		return false
	}
	r.ids[id] = expires
	return true
}

// NewNonce sets a fresh nonce cookie on the environment host and returns
// it, to be carried to the main host and back inside the token.
func (s *Store) NewNonce(w http.ResponseWriter) (string, error) {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a nonce: %w", err)
	}
	nonce := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, s.hostCookie(nonceCookie, nonce, int(nonceTTL.Seconds())))
	return nonce, nil
}

// IssueHandoff signs and encrypts a token for id to enter env on host,
// valid for HandoffTTL and for the browser holding nonce.
func (s *Store) IssueHandoff(id Identity, sessionExpires time.Time, env types.NamespacedName, host, nonce string) (string, error) {
	if env.Namespace == "" || env.Name == "" {
		// A token bound to no environment would match a cookie bound to
		// none (an old format's, say); refused here, not left to callers.
		return "", fmt.Errorf("a hand-off needs an environment, got %q", env)
	}
	idb := make([]byte, 12)
	if _, err := rand.Read(idb); err != nil {
		return "", fmt.Errorf("making a token ID: %w", err)
	}
	h := handoff{
		Identity: id, Env: env, Host: host, Nonce: nonce, SessionExpires: sessionExpires.Unix(),
		Expires: s.now().Add(HandoffTTL).Unix(), ID: base64.RawURLEncoding.EncodeToString(idb),
	}
	token, err := securecookie.EncodeMulti(handoffName, h, s.codecs...)
	if err != nil {
		return "", fmt.Errorf("encoding the hand-off: %w", err)
	}
	return token, nil
}

// RedeemHandoff checks token on host against the request's nonce cookie
// and, when it holds, sets the environment cookie and clears the nonce.
func (s *Store) RedeemHandoff(w http.ResponseWriter, r *http.Request, host, token string) (types.NamespacedName, error) {
	nc, err := s.only(r, nonceCookie)
	// The nonce is spent whatever the outcome.
	http.SetCookie(w, s.hostCookie(nonceCookie, "", -1))
	if err != nil || nc.Value == "" {
		return types.NamespacedName{}, ErrHandoff
	}
	var h handoff
	if err := securecookie.DecodeMulti(handoffName, token, &h, s.codecs...); err != nil {
		return types.NamespacedName{}, ErrHandoff
	}
	now := s.now().Unix()
	switch {
	case h.User == "", h.Host != host, h.Nonce != nc.Value, now >= h.Expires, now >= h.SessionExpires:
		return types.NamespacedName{}, ErrHandoff
	case !s.used.first(h.ID, h.Expires, now):
		return types.NamespacedName{}, ErrHandoff
	}
	value, err := securecookie.EncodeMulti(s.hostName(envCookie), envPayload{Identity: h.Identity, Env: h.Env, Expires: h.SessionExpires}, s.codecs...)
	if err != nil {
		return types.NamespacedName{}, fmt.Errorf("encoding the environment session: %w", err)
	}
	http.SetCookie(w, s.hostCookie(envCookie, value, int(h.SessionExpires-now)))
	return h.Env, nil
}

// LoadEnv returns the identity of the environment cookie, if it is valid
// and bound to env.
func (s *Store) LoadEnv(r *http.Request, env types.NamespacedName) (Identity, error) {
	if env.Namespace == "" || env.Name == "" {
		return Identity{}, ErrNoSession
	}
	c, err := s.only(r, envCookie)
	if err != nil {
		return Identity{}, ErrNoSession
	}
	p, known := s.verifiedEnv.get(c.Value)
	if !known {
		if err := securecookie.DecodeMulti(s.hostName(envCookie), c.Value, &p, s.codecs...); err != nil || p.User == "" {
			return Identity{}, ErrNoSession
		}
		s.verifiedEnv.put(c.Value, p)
	}
	if p.Env != env || s.now().Unix() >= p.Expires {
		return Identity{}, ErrNoSession
	}
	return p.Identity, nil
}

// ClearEnv removes the environment cookie (signing out of one host).
func (s *Store) ClearEnv(w http.ResponseWriter) {
	http.SetCookie(w, s.hostCookie(envCookie, "", -1))
}

// hostName is a cookie's name as the gateway sets it: __Host- prefixed
// whenever cookies are Secure, so the browser refuses a copy with a Domain
// attribute or another Path (cookie tossing from a sibling host).
func (s *Store) hostName(name string) string {
	if s.secure {
		return hostPrefix + name
	}
	return name
}

func (s *Store) hostCookie(name, value string, maxAge int) *http.Cookie {
	c := s.cookie(value, maxAge)
	c.Name = s.hostName(name)
	return c
}
