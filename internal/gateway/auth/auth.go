// Package auth signs users in: static users from a file (bcrypt hashes) for
// local use, and trusted headers from an authenticating proxy in front
// (oauth2-proxy). Every mode yields a session.Identity.
package auth

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"
	"sigs.k8s.io/yaml"

	"github.com/userland-dev/userland/internal/gateway/session"
)

// StaticUser is one entry of the static users file.
type StaticUser struct {
	// Name is the identity (spec.user of their Userlands).
	Name string `json:"name"`
	// Email is optional.
	Email string `json:"email,omitempty"`
	// Groups are optional, e.g. an admin group.
	Groups []string `json:"groups,omitempty"`
	// PasswordHash is a bcrypt hash (htpasswd -B, or `userland hash-password`).
	PasswordHash string `json:"passwordHash"`
}

// StaticUsers checks passwords against a fixed list.
type StaticUsers struct {
	users map[string]StaticUser
	// dummy is compared against for unknown users, so a wrong name takes
	// as long as a wrong password.
	dummy []byte
}

// LoadStaticUsers reads a YAML file: `users: [{name, email, groups, passwordHash}]`.
func LoadStaticUsers(path string) (*StaticUsers, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading static users: %w", err)
	}
	var file struct {
		Users []StaticUser `json:"users"`
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		return nil, fmt.Errorf("parsing static users %s: %w", path, err)
	}
	return NewStaticUsers(file.Users)
}

// NewStaticUsers validates and indexes users.
func NewStaticUsers(users []StaticUser) (*StaticUsers, error) {
	s := &StaticUsers{users: map[string]StaticUser{}}
	for i, u := range users {
		if u.Name == "" {
			return nil, fmt.Errorf("static user %d has no name", i)
		}
		if _, err := bcrypt.Cost([]byte(u.PasswordHash)); err != nil {
			return nil, fmt.Errorf("static user %q: passwordHash is not a bcrypt hash", u.Name)
		}
		if _, dup := s.users[u.Name]; dup {
			return nil, fmt.Errorf("static user %q is listed twice", u.Name)
		}
		s.users[u.Name] = u
	}
	dummy, err := bcrypt.GenerateFromPassword([]byte("not a password"), bcrypt.DefaultCost)
	if err != nil {
		return nil, fmt.Errorf("preparing password checks: %w", err)
	}
	s.dummy = dummy
	return s, nil
}

// ErrBadCredentials is returned for a wrong name or password (which one is
// not said).
var ErrBadCredentials = errors.New("wrong user name or password")

// Authenticate checks a name and password.
func (s *StaticUsers) Authenticate(name, password string) (session.Identity, error) {
	u, ok := s.users[name]
	hash := s.dummy
	if ok {
		hash = []byte(u.PasswordHash)
	}
	if err := bcrypt.CompareHashAndPassword(hash, []byte(password)); err != nil || !ok {
		return session.Identity{}, ErrBadCredentials
	}
	return session.Identity{User: u.Name, Email: u.Email, Groups: u.Groups}, nil
}

// TrustedHeader reads the identity an authenticating proxy in front put in
// headers — only from sources it trusts.
type TrustedHeader struct {
	// UserHeader, EmailHeader and GroupsHeader name the headers
	// (X-Forwarded-User, X-Forwarded-Email, X-Forwarded-Groups by default).
	UserHeader, EmailHeader, GroupsHeader string
	// Trusted are the source networks of the proxy.
	Trusted []netip.Prefix
	// Secret, when set, must arrive in SecretHeader too: an address range
	// such as a pod CIDR also holds pods that are not the proxy
	// (environments among them), so the address alone proves little.
	Secret       []byte
	SecretHeader string
}

// ErrUntrustedSource means identity headers came from outside the trusted
// networks.
var ErrUntrustedSource = errors.New("identity headers are only accepted from trusted proxies")

// Identity returns the identity in r's headers, when r comes from a
// trusted source and names a user.
func (t *TrustedHeader) Identity(r *http.Request) (session.Identity, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return session.Identity{}, ErrUntrustedSource
	}
	addr = addr.Unmap()
	trusted := false
	for _, p := range t.Trusted {
		if p.Contains(addr) {
			trusted = true
		}
	}
	if !trusted {
		return session.Identity{}, ErrUntrustedSource
	}
	if len(t.Secret) > 0 && subtle.ConstantTimeCompare([]byte(r.Header.Get(t.SecretHeader)), t.Secret) != 1 {
		return session.Identity{}, ErrUntrustedSource
	}
	id := session.Identity{User: strings.TrimSpace(r.Header.Get(t.UserHeader)), Email: strings.TrimSpace(r.Header.Get(t.EmailHeader))}
	if id.User == "" {
		return session.Identity{}, session.ErrNoSession
	}
	for _, g := range strings.Split(r.Header.Get(t.GroupsHeader), ",") {
		if g = strings.TrimSpace(g); g != "" {
			id.Groups = append(id.Groups, g)
		}
	}
	return id, nil
}

// SafeReturnPath returns rd if it is a path on this site, else "/": the
// login return URL must never send a user to another site.
func SafeReturnPath(rd string) string {
	if !strings.HasPrefix(rd, "/") || strings.HasPrefix(rd, "//") || strings.HasPrefix(rd, "/\\") ||
		strings.ContainsAny(rd, "\r\n\t\\") {
		return "/"
	}
	return rd
}
