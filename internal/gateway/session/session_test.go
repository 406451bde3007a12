package session

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func key(b byte) Key {
	return Key{Hash: bytes.Repeat([]byte{b}, 32), Block: bytes.Repeat([]byte{b + 1}, 32)}
}

type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time { return f.t }

func saved(t *testing.T, s *Store, id Identity) *http.Cookie {
	t.Helper()
	rec := httptest.NewRecorder()
	if err := s.Save(rec, id); err != nil {
		t.Fatal(err)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("got %d cookies", len(cookies))
	}
	return cookies[0]
}

func request(c *http.Cookie) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if c != nil {
		r.AddCookie(c)
	}
	return r
}

func TestRoundTripAndCookieFlags(t *testing.T) {
	t.Parallel()
	clock := &fakeNow{time.Unix(1_800_000_000, 0)}
	s, err := NewStore([]Key{key(1)}, 8*time.Hour, true, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	id := Identity{User: "Taro.Yamada@uni.example.ac.jp", Email: "Taro.Yamada@uni.example.ac.jp", Groups: []string{"cs101"}}
	c := saved(t, s, id)
	if c.Name != "__Host-"+CookieName {
		t.Errorf("secure session cookie named %q, want the __Host- prefix", c.Name)
	}
	if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" {
		t.Errorf("cookie flags: secure=%v httpOnly=%v sameSite=%v path=%q", c.Secure, c.HttpOnly, c.SameSite, c.Path)
	}
	if strings.Contains(c.Value, "Taro") {
		t.Error("the identity is readable in the cookie; it must be encrypted")
	}
	got, err := s.Load(request(c))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(id, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRejectedSessions(t *testing.T) {
	t.Parallel()
	clock := &fakeNow{time.Unix(1_800_000_000, 0)}
	s, _ := NewStore([]Key{key(1)}, time.Hour, true, clock.now)
	other, _ := NewStore([]Key{key(7)}, time.Hour, true, clock.now)
	good := saved(t, s, Identity{User: "alice"})

	tampered := *good
	b := []byte(tampered.Value)
	b[len(b)/2] ^= 1
	tampered.Value = string(b)

	cases := map[string]func() *http.Cookie{
		"no cookie":               func() *http.Cookie { return nil },
		"forged with another key": func() *http.Cookie { return saved(t, other, Identity{User: "alice"}) },
		"tampered":                func() *http.Cookie { return &tampered },
		"garbage":                 func() *http.Cookie { return &http.Cookie{Name: CookieName, Value: "x|y|z"} },
		"empty user": func() *http.Cookie {
			return saved(t, s, Identity{})
		},
	}
	for name, cookie := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := s.Load(request(cookie())); !errors.Is(err, ErrNoSession) {
				t.Errorf("got %v, want ErrNoSession", err)
			}
		})
	}

	t.Run("expired", func(t *testing.T) {
		// Verified once while valid, so the expiry is judged on a
		// remembered cookie too.
		if _, err := s.Load(request(good)); err != nil {
			t.Fatalf("a fresh session was rejected: %v", err)
		}
		clock.t = clock.t.Add(time.Hour)
		defer func() { clock.t = clock.t.Add(-time.Hour) }()
		if _, err := s.Load(request(good)); !errors.Is(err, ErrNoSession) {
			t.Errorf("got %v, want ErrNoSession for an expired session", err)
		}
	})
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	clock := &fakeNow{time.Unix(1_800_000_000, 0)}
	old, _ := NewStore([]Key{key(1)}, time.Hour, true, clock.now)
	rotated, _ := NewStore([]Key{key(3), key(1)}, time.Hour, true, clock.now)
	retired, _ := NewStore([]Key{key(3)}, time.Hour, true, clock.now)

	c := saved(t, old, Identity{User: "alice"})
	if _, err := rotated.Load(request(c)); err != nil {
		t.Errorf("a session signed with the previous key was refused during rotation: %v", err)
	}
	fresh := saved(t, rotated, Identity{User: "alice"})
	if _, err := retired.Load(request(fresh)); err != nil {
		t.Errorf("the newest key does not sign new sessions: %v", err)
	}
	if _, err := retired.Load(request(c)); !errors.Is(err, ErrNoSession) {
		t.Errorf("a session signed with a retired key was accepted: %v", err)
	}
}

func TestKeySizesAreChecked(t *testing.T) {
	t.Parallel()
	if _, err := NewStore([]Key{{Hash: []byte("short"), Block: bytes.Repeat([]byte{1}, 32)}}, time.Hour, true, nil); err == nil {
		t.Error("a 5-byte hash key was accepted")
	}
	if _, err := NewStore(nil, time.Hour, true, nil); err == nil {
		t.Error("no keys was accepted")
	}
}

func TestCSRFTokenIsBoundToTheSession(t *testing.T) {
	t.Parallel()
	key := func(b byte) Key { return Key{Hash: bytes.Repeat([]byte{b}, 32), Block: bytes.Repeat([]byte{b}, 32)} }
	old, err := NewStore([]Key{key(1)}, time.Hour, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := NewStore([]Key{key(2), key(1)}, time.Hour, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	withSession := func(s *Store, user string) *http.Request {
		rec := httptest.NewRecorder()
		if err := s.Save(rec, Identity{User: user}); err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		for _, c := range rec.Result().Cookies() {
			r.AddCookie(c)
		}
		return r
	}
	alice, bob := withSession(old, "alice"), withSession(old, "bob")
	token := old.CSRFToken(alice)
	tests := map[string]struct {
		store *Store
		req   *http.Request
		token string
		want  bool
	}{
		"own session":                   {old, alice, token, true},
		"after key rotation":            {rotated, alice, token, true},
		"another user's session":        {old, bob, token, false},
		"no token":                      {old, alice, "", false},
		"no session":                    {old, httptest.NewRequest(http.MethodPost, "/", nil), token, false},
		"token from an unknown key":     {mustStore(t, key(3)), alice, token, false},
		"token with one character less": {old, alice, token[1:], false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.store.CheckCSRF(tc.req, tc.token); got != tc.want {
				t.Errorf("CheckCSRF = %v, want %v", got, tc.want)
			}
		})
	}
	if got := old.CSRFToken(httptest.NewRequest(http.MethodGet, "/", nil)); got != "" {
		t.Errorf("token without a session = %q, want empty", got)
	}
}

func mustStore(t *testing.T, k Key) *Store {
	s, err := NewStore([]Key{k}, time.Hour, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A second cookie of the session's name was planted by someone (a sibling
// host, or a page with a longer Path): the request is signed out rather
// than signed in as whichever copy comes first.
func TestTwoSessionCookiesAreRefused(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{true, false} {
		clock := &fakeNow{time.Unix(1_800_000_000, 0)}
		s, err := NewStore([]Key{key(1)}, 8*time.Hour, secure, clock.now)
		if err != nil {
			t.Fatal(err)
		}
		victim := saved(t, s, Identity{User: "admin"})
		planted := saved(t, s, Identity{User: "mallory"})
		r := request(planted)
		r.AddCookie(victim)
		if id, err := s.Load(r); !errors.Is(err, ErrNoSession) {
			t.Errorf("secure=%v: two session cookies signed in as %q", secure, id.User)
		}
		if tok := s.CSRFToken(r); tok != "" || s.CheckCSRF(r, csrfMAC(s.csrfKeys[0], planted.Value)) {
			t.Errorf("secure=%v: a CSRF token came from an ambiguous session", secure)
		}
		if id, err := s.Load(request(victim)); err != nil || id.User != "admin" {
			t.Errorf("secure=%v: the one real cookie alone: %q %v", secure, id.User, err)
		}
	}
}
