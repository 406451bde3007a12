// Package session keeps a signed-in user's identity in an encrypted,
// authenticated cookie (github.com/gorilla/securecookie: AES + HMAC), so
// that any gateway replica can read it and no server-side store is needed.
package session

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/securecookie"

	"github.com/userland-dev/userland/internal/identity"
)

// CookieName is the session cookie's name (with the __Host- prefix when
// cookies are Secure). The gateway never forwards it to
// environments.
const CookieName = "userland_session"

// Identity is who a session belongs to: the identity type that the course
// rules accept too (identity.Identity), so nothing converts between them.
type Identity = identity.Identity

// payload is what the cookie carries: the identity and its own expiry, so
// an old cookie replayed by a client is refused even if the browser kept it.
type payload struct {
	Identity
	Expires int64 `json:"x"`
}

// Key is one secret for sessions: a 32- or 64-byte hash key and a 16-, 24-
// or 32-byte AES key.
type Key struct {
	Hash, Block []byte
}

// Store encodes and decodes session cookies.
type Store struct {
	codecs []securecookie.Codec
	// csrfKeys are the hash keys, newest first, that bind form tokens to
	// a session.
	csrfKeys [][]byte
	ttl      time.Duration
	secure   bool
	now      func() time.Time

	// verified and verifiedEnv remember session and environment cookies
	// that decoded and verified, by value: every proxied request carries
	// one, and verifying it (HMAC, AES, JSON) was the largest piece of the
	// gateway's own CPU per request (docs/benchmarks.md). An entry is only
	// as good as its payload's expiry, which is checked on every use.
	verified    memo[payload]
	verifiedEnv memo[envPayload]

	// used makes hand-off tokens single-use on this replica.
	used redeemed
}

// maxVerified bounds a verified-cookie memo; when full it starts over.
const maxVerified = 16384

// memo maps cookie values that verified to what they carry.
type memo[T any] struct {
	mu sync.RWMutex
	m  map[string]T
}

func (m *memo[T]) get(value string) (T, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.m[value]
	return p, ok
}

func (m *memo[T]) put(value string, p T) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= maxVerified {
		m.m = map[string]T{}
	}
	m.m[value] = p
}

// NewStore builds a store. The first key signs and encrypts new sessions;
// every key is accepted when reading, so keys rotate without signing
// everybody out. ttl bounds a session's life; secure sets the cookie's
// Secure flag (off only for plain-HTTP local use).
func NewStore(keys []Key, ttl time.Duration, secure bool, now func() time.Time) (*Store, error) {
	if len(keys) == 0 {
		return nil, errors.New("at least one session key is required")
	}
	if now == nil {
		now = time.Now
	}
	var pairs, csrfKeys [][]byte
	for i, k := range keys {
		if l := len(k.Hash); l != 32 && l != 64 {
			return nil, fmt.Errorf("session key %d: hash key must be 32 or 64 bytes, got %d", i, l)
		}
		if l := len(k.Block); l != 16 && l != 24 && l != 32 {
			return nil, fmt.Errorf("session key %d: encryption key must be 16, 24 or 32 bytes, got %d", i, l)
		}
		pairs = append(pairs, k.Hash, k.Block)
		csrfKeys = append(csrfKeys, k.Hash)
	}
	codecs := securecookie.CodecsFromPairs(pairs...)
	for _, c := range codecs {
		sc := c.(*securecookie.SecureCookie)
		sc.MaxAge(int(ttl.Seconds()) + 60)
		sc.SetSerializer(securecookie.JSONEncoder{})
	}
	return &Store{codecs: codecs, csrfKeys: csrfKeys, ttl: ttl, secure: secure, now: now}, nil
}

// Save writes a session cookie for id.
func (s *Store) Save(w http.ResponseWriter, id Identity) error {
	value, err := securecookie.EncodeMulti(CookieName, payload{Identity: id, Expires: s.now().Add(s.ttl).Unix()}, s.codecs...)
	if err != nil {
		return fmt.Errorf("encoding session: %w", err)
	}
	http.SetCookie(w, s.cookie(value, int(s.ttl.Seconds())))
	return nil
}

// Clear removes the session cookie (sign-out).
func (s *Store) Clear(w http.ResponseWriter) {
	http.SetCookie(w, s.cookie("", -1))
}

func (s *Store) cookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: s.hostName(CookieName), Value: value, Path: "/", MaxAge: maxAge,
		Secure: s.secure, HttpOnly: true, SameSite: http.SameSiteLaxMode,
	}
}

// ErrNoSession means the request carries no valid session.
var ErrNoSession = errors.New("no valid session")

// Load returns the request's identity. A missing, forged, tampered or
// expired cookie is ErrNoSession.
func (s *Store) Load(r *http.Request) (Identity, error) {
	id, _, err := s.LoadSession(r)
	return id, err
}

// LoadSession is Load that also returns when the session ends.
func (s *Store) LoadSession(r *http.Request) (Identity, time.Time, error) {
	c, err := s.only(r, CookieName)
	if err != nil {
		return Identity{}, time.Time{}, ErrNoSession
	}
	p, known := s.verified.get(c.Value)
	if !known {
		if err := securecookie.DecodeMulti(CookieName, c.Value, &p, s.codecs...); err != nil || p.User == "" {
			return Identity{}, time.Time{}, ErrNoSession
		}
		s.verified.put(c.Value, p)
	}
	if s.now().Unix() >= p.Expires {
		return Identity{}, time.Time{}, ErrNoSession
	}
	return p.Identity, time.Unix(p.Expires, 0), nil
}

// FlowCookieName carries an OAuth sign-in in progress between the redirect
// to the identity provider and the callback.
const FlowCookieName = "userland_oauth"

// flowTTL bounds how long a user may take at the identity provider.
const flowTTL = 10 * time.Minute

// Flow is the state of one OAuth sign-in: what the callback must match
// (state, nonce), the PKCE verifier, and where to return.
type Flow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Return   string `json:"r"`
	Expires  int64  `json:"x"`
}

// SaveFlow stores a sign-in in progress in its own short-lived cookie.
func (s *Store) SaveFlow(w http.ResponseWriter, f Flow) error {
	f.Expires = s.now().Add(flowTTL).Unix()
	value, err := securecookie.EncodeMulti(FlowCookieName, f, s.codecs...)
	if err != nil {
		return fmt.Errorf("encoding sign-in state: %w", err)
	}
	c := s.hostCookie(FlowCookieName, value, int(flowTTL.Seconds()))
	http.SetCookie(w, c)
	return nil
}

// TakeFlow returns the sign-in in progress and clears its cookie; it can be
// used once.
func (s *Store) TakeFlow(w http.ResponseWriter, r *http.Request) (Flow, error) {
	http.SetCookie(w, s.hostCookie(FlowCookieName, "", -1))
	cookie, err := s.only(r, FlowCookieName)
	if err != nil {
		return Flow{}, ErrNoSession
	}
	var f Flow
	if err := securecookie.DecodeMulti(FlowCookieName, cookie.Value, &f, s.codecs...); err != nil || s.now().Unix() >= f.Expires {
		return Flow{}, ErrNoSession
	}
	return f, nil
}

// CSRFToken returns the token a form must carry: an HMAC of the request's
// session cookie, so it is valid for this session only and needs no
// server-side state. Without a session cookie it is empty.
func (s *Store) CSRFToken(r *http.Request) string {
	c, err := s.only(r, CookieName)
	if err != nil || c.Value == "" {
		return ""
	}
	return csrfMAC(s.csrfKeys[0], c.Value)
}

// CheckCSRF reports whether token belongs to the request's session under
// any current key, so rotating keys does not break open forms.
func (s *Store) CheckCSRF(r *http.Request, token string) bool {
	c, err := s.only(r, CookieName)
	if err != nil || c.Value == "" || token == "" {
		return false
	}
	for _, k := range s.csrfKeys {
		if hmac.Equal([]byte(csrfMAC(k, c.Value)), []byte(token)) {
			return true
		}
	}
	return false
}

func csrfMAC(key []byte, value string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("userland-csrf\x00" + value))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// only returns the request's one cookie called name (prefixed as the store
// sets it). Two or more are refused as a whole: a second cookie of the
// same name can only have been planted (by a sibling host with a Domain
// attribute, or by a page on this origin with a longer Path, which the
// browser then sends first), and taking either one would let the planter
// choose whose session the viewer is in.
func (s *Store) only(r *http.Request, name string) (*http.Cookie, error) {
	cookies := r.CookiesNamed(s.hostName(name))
	if len(cookies) != 1 {
		return nil, ErrNoSession
	}
	return cookies[0], nil
}
