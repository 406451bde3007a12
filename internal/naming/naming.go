// Package naming holds the rules that turn a Userland into the addresses
// people open: its host label under the environment domain, its URL and its
// base path. The controller (status.url), the gateway (routing) and the
// tools that print URLs all use these functions, so an address means the
// same thing everywhere.
package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/url"
	"strings"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// maxLabel is the longest DNS label (RFC 1035).
const maxLabel = 63

// hashLen is how many hex digits of SHA-256 a hashed label carries (48
// bits: a collision among a cluster's Userlands is vanishingly unlikely, and
// the gateway refuses a host that matches more than one).
const hashLen = 12

// HostLabel is the DNS label of an environment's host under the environment
// domain. It is "<name>--<namespace>" when neither part contains "--" and
// the result fits in one label; otherwise a readable prefix of the name and a
// hash of namespace and name ("<name-prefix>-<hash>"). The readable form has
// exactly one "--" and the hashed form none, so no two Userlands share a
// label: "a" in namespace "b--c" and "a--b" in "c" both get hashed labels,
// distinct because their hashes differ.
func HostLabel(namespace, name string) string {
	if !strings.Contains(name, "--") && !strings.Contains(namespace, "--") && len(name)+2+len(namespace) <= maxLabel {
		return name + "--" + namespace
	}
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	prefix := name
	for strings.Contains(prefix, "--") {
		prefix = strings.ReplaceAll(prefix, "--", "-")
	}
	if limit := maxLabel - 1 - hashLen; len(prefix) > limit {
		prefix = prefix[:limit]
	}
	prefix = strings.TrimRight(prefix, "-")
	return prefix + "-" + hex.EncodeToString(sum[:])[:hashLen]
}

// Routing is the routing an environment is served with. Without an
// environment domain there are no environment hosts, so it is Path.
// With one, it is the template's own choice when it makes one, and
// otherwise Subdomain: each environment its own origin, safe by default.
func Routing(spec v1alpha1.Routing, haveDomain bool) v1alpha1.Routing {
	switch {
	case !haveDomain:
		return v1alpha1.RoutingPath
	case spec != "":
		return spec
	default:
		return v1alpha1.RoutingSubdomain
	}
}

// Routes says where the gateway serves environments.
type Routes struct {
	// GatewayURL is the main host's external URL, e.g.
	// https://userland.example.edu: the dashboard, sign-in and
	// path-routed environments.
	GatewayURL *url.URL
	// Domain is the environment domain: environment hosts are
	// <label>.<Domain>, on GatewayURL's scheme and port. Empty: no
	// subdomain routing.
	Domain string
}

// Host is the host (with the gateway's port, if it has one) that serves a
// subdomain-routed environment.
func (r Routes) Host(namespace, name string) string {
	host := HostLabel(namespace, name) + "." + strings.TrimSuffix(r.Domain, ".")
	if r.GatewayURL != nil && r.GatewayURL.Port() != "" {
		host = net.JoinHostPort(host, r.GatewayURL.Port())
	}
	return host
}

// URL is the address a user opens for the environment; empty without a
// gateway URL.
func (r Routes) URL(namespace, name string, routing v1alpha1.Routing) string {
	if r.GatewayURL == nil {
		return ""
	}
	u := *r.GatewayURL
	if routing == v1alpha1.RoutingSubdomain && r.Domain != "" {
		u.Host = r.Host(namespace, name)
		u.Path = "/"
		return u.String()
	}
	return u.JoinPath("u", namespace, name).String() + "/"
}

// BasePath is the path prefix the environment is served under.
func BasePath(namespace, name string, routing v1alpha1.Routing) string {
	if routing == v1alpha1.RoutingSubdomain {
		return "/"
	}
	return "/u/" + namespace + "/" + name + "/"
}

// NameFor derives the Userland name auto-provisioning gives an identity:
// lower-case letters, digits and '-', starting with a letter, at most 63
// characters. When that loses information (any change at all, including
// case), a hash of the identity is appended, so two identities never share
// a name and the same identity always gets the same one.
func NameFor(identity string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(identity) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		default:
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	name := strings.TrimRight(b.String(), "-")
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		name = "u-" + name
	}
	if name == identity && len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(identity))
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	if len(name) > 63-len(suffix) {
		name = strings.TrimRight(name[:63-len(suffix)], "-")
	}
	return name + suffix
}

// UserlandName is the Userland name for a user and template (as
// "<Kind>/<name>"): derived only from them, so every gateway replica, the
// roster import, the plugin and `userland dev` pick the same name and
// concurrent sign-ins collapse into one object. The '/' never survives
// sanitising, so a hash of both is always appended and no two pairs share
// a name.
func UserlandName(user, template string) string {
	return NameFor(user + "/" + template)
}
