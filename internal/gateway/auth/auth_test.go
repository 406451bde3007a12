package auth

import (
	"errors"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/bcrypt"

	"github.com/userland-dev/userland/internal/gateway/session"
)

func hash(t *testing.T, pw string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func TestStaticUsers(t *testing.T) {
	users, err := NewStaticUsers([]StaticUser{{Name: "alice", Email: "alice@example.com", Groups: []string{"admins"}, PasswordHash: hash(t, "wonderland")}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := users.Authenticate("alice", "wonderland")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(session.Identity{User: "alice", Email: "alice@example.com", Groups: []string{"admins"}}, id); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, c := range [][2]string{{"alice", "wrong"}, {"bob", "wonderland"}, {"", ""}, {"alice", ""}} {
		if _, err := users.Authenticate(c[0], c[1]); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("Authenticate(%q, %q) = %v, want ErrBadCredentials", c[0], c[1], err)
		}
	}
	if _, err := NewStaticUsers([]StaticUser{{Name: "x", PasswordHash: "plaintext"}}); err == nil {
		t.Error("a plaintext password was accepted as a hash")
	}
}

func TestTrustedHeader(t *testing.T) {
	th := &TrustedHeader{UserHeader: "X-Forwarded-User", EmailHeader: "X-Forwarded-Email", GroupsHeader: "X-Forwarded-Groups",
		Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Forwarded-User", "alice")
	r.Header.Set("X-Forwarded-Groups", "a, b,,")
	r.RemoteAddr = "10.1.2.3:5555"
	id, err := th.Identity(r)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(session.Identity{User: "alice", Groups: []string{"a", "b"}}, id); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	r.RemoteAddr = "192.0.2.1:5555"
	if _, err := th.Identity(r); !errors.Is(err, ErrUntrustedSource) {
		t.Errorf("untrusted source: %v", err)
	}
	r.RemoteAddr = "[::ffff:10.1.2.3]:5555"
	if _, err := th.Identity(r); err != nil {
		t.Errorf("IPv4-mapped trusted source refused: %v", err)
	}
}

func TestSafeReturnPath(t *testing.T) {
	for in, want := range map[string]string{
		"/u/cs101/taro/?x=1":    "/u/cs101/taro/?x=1",
		"//evil.example/":       "/",
		"/\\evil.example":       "/",
		"https://evil.example/": "/",
		"":                      "/",
		"/ok\r\nSet-Cookie: x":  "/",
		"javascript:alert(1)":   "/",
	} {
		if got := SafeReturnPath(in); got != want {
			t.Errorf("SafeReturnPath(%q) = %q, want %q", in, got, want)
		}
	}
}
