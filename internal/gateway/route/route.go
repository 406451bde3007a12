// Package route maps a request to the Userland it addresses, strictly: any
// ambiguity (encoded slashes, dot segments, wrong case, odd hosts) is a
// refusal, never a guess, because the answer decides whose environment a
// request reaches.
package route

import (
	"errors"
	"net"
	"regexp"
	"strings"
)

// PathPrefix starts every path-routed environment URL.
const PathPrefix = "/u/"

// Target is the environment a request addresses.
type Target struct {
	// Namespace and Name identify the Userland.
	Namespace, Name string
	// Prefix is the path prefix the gateway serves the environment under
	// ("/u/<namespace>/<name>"), empty with subdomain routing.
	Prefix string
	// Rest is the escaped path after the prefix, starting with "/".
	Rest string
}

// ErrNotEnvironment means the request is not for an environment (a
// gateway path such as /login, or another host).
var ErrNotEnvironment = errors.New("not an environment URL")

// ErrInvalid means the request addresses an environment in a way that is
// not allowed (dot segments, encoded separators, invalid names).
var ErrInvalid = errors.New("invalid environment URL")

// ErrNeedsSlash means "/u/<ns>/<name>" without the trailing slash; the
// gateway redirects so relative links in the app resolve.
var ErrNeedsSlash = errors.New("environment URL needs a trailing slash")

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func validLabel(s string) bool { return len(s) <= 63 && dnsLabel.MatchString(s) }

// FromPath parses a path-routed request from its escaped path
// (url.URL.EscapedPath), so that %2F is seen as such and not as a separator.
func FromPath(escapedPath string) (Target, error) {
	if !strings.HasPrefix(escapedPath, PathPrefix) {
		return Target{}, ErrNotEnvironment
	}
	if hasDotSegment(escapedPath) {
		return Target{}, ErrInvalid
	}
	parts := strings.SplitN(strings.TrimPrefix(escapedPath, PathPrefix), "/", 3)
	if len(parts) < 2 {
		return Target{}, ErrInvalid
	}
	ns, name := parts[0], parts[1]
	// Names are plain DNS labels: anything escaped, upper-case or dotted
	// is refused rather than normalised.
	if !validLabel(ns) || !validLabel(name) {
		return Target{}, ErrInvalid
	}
	t := Target{Namespace: ns, Name: name, Prefix: PathPrefix + ns + "/" + name}
	if len(parts) == 2 {
		return t, ErrNeedsSlash
	}
	t.Rest = "/" + parts[2]
	return t, nil
}

// hasDotSegment reports "." or ".." segments, also percent-encoded, which
// clients and proxies may resolve differently from the gateway.
func hasDotSegment(escapedPath string) bool {
	for _, seg := range strings.Split(escapedPath, "/") {
		s := strings.ToLower(seg)
		s = strings.ReplaceAll(s, "%2e", ".")
		if s == "." || s == ".." {
			return true
		}
	}
	return false
}

// LabelFromHost returns the environment host label of a request's Host
// header, "<label>.<domain>[:port]", where domain is the environment
// domain. Which Userland a label names is the gateway's look-up
// (naming.HostLabel indexed over its cache), not a parse: labels may be
// hashed, and a parse could be fooled by names containing "--".
func LabelFromHost(host, domain string) (string, error) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	base := "." + strings.TrimSuffix(domain, ".")
	if domain == "" || !strings.HasSuffix(host, base) {
		return "", ErrNotEnvironment
	}
	label := strings.TrimSuffix(host, base)
	if !validLabel(label) {
		return "", ErrInvalid
	}
	return label, nil
}
