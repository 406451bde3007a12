// Package naming holds the rules that turn a Userland into the addresses
// people open: its host label under the environment domain, its URL and its
// base path, and the names of what the controller makes for it (claims,
// policies, the pods of its Deployment, which the gateway alone may route
// to). The controller (status.url), the gateway (routing) and the tools
// that print URLs all use these functions, so a name means the same thing
// everywhere.
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

// NameFor derives a name from an identity: lower-case letters, digits and
// '-', starting with a letter, at most 63 characters. When that loses
// information (any change at all, including case), a hash of the identity
// is appended, so two identities never share a name and the same identity
// always gets the same one. Environments created before readable names
// carry NameFor(user + "/" + kind + "/" + template); they keep it.
func NameFor(identity string) string {
	name := sanitise(identity, 63)
	if name == identity {
		return name
	}
	sum := sha256.Sum256([]byte(identity))
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	if len(name) > 63-len(suffix) {
		name = strings.TrimRight(name[:63-len(suffix)], "-")
	}
	return name + suffix
}

// sanitise lower-cases s, keeps letters and digits, turns every other run
// into one '-', makes it start with a letter and cuts it to at most limit
// characters (limit ≥ 3).
func sanitise(s string, limit int) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
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
	if len(name) > limit {
		name = name[:limit]
	}
	return strings.TrimRight(name, "-")
}

// Readable names are "<user>-<template>": the user's local part (before
// '@') cut to maxUserPart characters and the template cut to
// maxTemplatePart, so a hashed form still fits a Service name (63) and
// short namespaces still get readable host labels.
const (
	maxUserPart     = 20
	maxTemplatePart = 24
	shortHashLen    = 6
)

// ReadableName is the name a user's environment from a template gets when
// nobody else has it, e.g. "alice-jupyterlab" for alice@uni.example.edu
// and template jupyterlab.
func ReadableName(user, template string) string {
	local, _, _ := strings.Cut(user, "@")
	return sanitise(local, maxUserPart) + "-" + strings.TrimPrefix(sanitise(template, maxTemplatePart), "u-")
}

// HashedName is the name used when the readable one belongs to another
// user or template: the readable name and a short hash of user, kind and
// template, e.g. "alice-jupyterlab-3f9a1c".
func HashedName(user string, ref v1alpha1.TemplateReference) string {
	sum := sha256.Sum256([]byte(user + "\x00" + string(ref.Kind.OrDefault()) + "/" + ref.Name))
	return ReadableName(user, ref.Name) + "-" + hex.EncodeToString(sum[:])[:shortHashLen]
}

// CandidateNames are the names a new environment of user from ref may
// take, in order of preference.
func CandidateNames(user string, ref v1alpha1.TemplateReference) []string {
	return []string{ReadableName(user, ref.Name), HashedName(user, ref)}
}

// maxPolicyTemplatePart bounds the template's readable part in
// TemplateNetworkPolicy so "userland.clustertemplate.<part>-<hash>" fits a
// label value (63): the name is also the label that selects the pods.
const maxPolicyTemplatePart = 21

// policyHashLen is how many hex digits of SHA-256 TemplateNetworkPolicy
// carries: 64 bits, so nobody allowed to create templates can search out a
// name that shares another template's policy (32 bits took minutes).
const policyHashLen = 16

// TemplateNetworkPolicy names the one NetworkPolicy an environment pod of
// the template (kind, name) is isolated by in its namespace, e.g.
// "userland.template.jupyterlab-1a2b3c4d5e6f7a8b". The same string is the value of
// the pod label that policy selects. It holds dots, which a Userland's name
// cannot, so it never collides with a per-Userland child; and a hash of kind
// and name, so "a.b" and "a-b", or a Template and a ClusterTemplate of one
// name, never share a policy.
func TemplateNetworkPolicy(kind v1alpha1.TemplateKind, name string) string {
	kind = kind.OrDefault()
	sum := sha256.Sum256([]byte(string(kind) + "/" + name))
	part := strings.TrimPrefix(sanitise(name, maxPolicyTemplatePart), "u-")
	return "userland." + strings.ToLower(string(kind)) + "." + part + "-" + hex.EncodeToString(sum[:])[:policyHashLen]
}
