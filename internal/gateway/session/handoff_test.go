package session

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// redeemer runs one redemption with the given cookies and returns the
// response's cookies.
func redeem(t *testing.T, s *Store, host, token string, cookies ...*http.Cookie) ([]*http.Cookie, types.NamespacedName, error) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "http://"+host+"/.userland/handoff", nil)
	for _, c := range cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	env, err := s.RedeemHandoff(w, r, host, token)
	return w.Result().Cookies(), env, err
}

func TestHandoffIsBoundToHostBrowserAndTime(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	s, err := NewStore([]Key{testKey("a")}, time.Hour, true, clock)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewStore([]Key{testKey("b")}, time.Hour, true, clock)
	env := types.NamespacedName{Namespace: "cs101", Name: "alice"}
	id := Identity{User: "alice", Groups: []string{"students"}}
	w := httptest.NewRecorder()
	nonce, err := s.NewNonce(w)
	if err != nil {
		t.Fatal(err)
	}
	nonceCookie := w.Result().Cookies()[0]
	if nonceCookie.Name != "__Host-userland_handoff" || !nonceCookie.Secure || !nonceCookie.HttpOnly || nonceCookie.Domain != "" || nonceCookie.Path != "/" {
		t.Fatalf("nonce cookie %+v is not a host-only secure cookie", nonceCookie)
	}
	host := "alice--cs101.apps.example.edu"
	issue := func(s *Store, host, nonce string) string {
		tok, err := s.IssueHandoff(id, now.Add(30*time.Minute), env, host, nonce)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	for name, tc := range map[string]struct {
		token   string
		host    string
		cookies []*http.Cookie
		advance time.Duration
	}{
		"redeemed on another environment's host": {issue(s, host, nonce), "bob--cs101.apps.example.edu", []*http.Cookie{nonceCookie}, 0},
		"without the browser's nonce cookie":     {issue(s, host, nonce), host, nil, 0},
		"with another browser's nonce":           {issue(s, host, "other-nonce"), host, []*http.Cookie{nonceCookie}, 0},
		"signed with a key the gateway lacks":    {issue(other, host, nonce), host, []*http.Cookie{nonceCookie}, 0},
		"tampered":                               {issue(s, host, nonce) + "x", host, []*http.Cookie{nonceCookie}, 0},
		"after its minute":                       {issue(s, host, nonce), host, []*http.Cookie{nonceCookie}, HandoffTTL + time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() { now = time.Unix(1_800_000_000, 0) }()
			now = now.Add(tc.advance)
			if _, _, err := redeem(t, s, tc.host, tc.token, tc.cookies...); !errors.Is(err, ErrHandoff) {
				t.Errorf("redeemed: %v", err)
			}
		})
	}

	token := issue(s, host, nonce)
	set, got, err := redeem(t, s, host, token, nonceCookie)
	if err != nil || got != env {
		t.Fatalf("valid hand-off: %v %v", got, err)
	}
	var envCookie *http.Cookie
	for _, c := range set {
		if c.Name == "__Host-userland_env" {
			envCookie = c
		}
	}
	if envCookie == nil || !envCookie.Secure || !envCookie.HttpOnly || envCookie.Domain != "" || envCookie.Path != "/" || envCookie.MaxAge != 1800 {
		t.Fatalf("environment cookie %+v: want host-only, Secure, HttpOnly, ending with the session", envCookie)
	}
	if _, _, err := redeem(t, s, host, token, nonceCookie); !errors.Is(err, ErrHandoff) {
		t.Error("a token was redeemed twice")
	}
	r := httptest.NewRequest(http.MethodGet, "http://"+host+"/", nil)
	r.AddCookie(envCookie)
	if who, err := s.LoadEnv(r, env); err != nil || who.User != "alice" {
		t.Errorf("environment cookie on its own environment: %v %v", who, err)
	}
	for _, other := range []types.NamespacedName{{Namespace: "cs101", Name: "bob"}, {Namespace: "alice", Name: "cs101"}, {Namespace: "cs101"}, {Name: "alice"}, {}} {
		if _, err := s.LoadEnv(r, other); err == nil {
			t.Errorf("alice's environment cookie opened %q", other)
		}
	}
	for _, none := range []types.NamespacedName{{}, {Namespace: "cs101"}, {Name: "alice"}} {
		if _, err := s.IssueHandoff(id, now.Add(30*time.Minute), none, host, nonce); err == nil {
			t.Errorf("a hand-off was issued for %q, no environment", none)
		}
	}
	now = now.Add(31 * time.Minute)
	if _, err := s.LoadEnv(r, env); err == nil {
		t.Error("the environment cookie outlived its session")
	}
}

func testKey(seed string) Key {
	return Key{Hash: []byte(strings.Repeat(seed, 32)), Block: []byte(strings.Repeat(seed, 32))}
}
