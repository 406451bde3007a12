// Package route maps a request to the Userland it addresses, strictly: any
// ambiguity (encoded slashes, dot segments, wrong case, odd hosts) is a
// refusal, never a guess, because the answer decides whose environment a
// request reaches.
package route

import (
	"errors"
	"net"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// PathPrefix starts every path-routed environment URL.
const PathPrefix = "/u/"

// Target is the environment a request addresses, as it goes on from
// routing to the access check, the wake, the session binding and the
// proxy: the Userland's key, and where in the URL the environment is.
type Target struct {
	// NamespacedName identifies the Userland; the key every later step
	// looks it up, binds a session to and counts activity by.
	types.NamespacedName
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

// validLabel reports an RFC 1123 DNS label: 1 to 63 of [-a-z0-9], starting
// and ending alphanumeric. Written out rather than a regular expression
// because it runs twice on every proxied request.
func validLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLabelByte(c) {
			return false
		}
	}
	return true
}

func isLabelByte(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' }

// FromPath parses a path-routed request from its escaped path
// (url.URL.EscapedPath), so that %2F is seen as such and not as a separator.
func FromPath(escapedPath string) (Target, error) {
	if !strings.HasPrefix(escapedPath, PathPrefix) {
		return Target{}, ErrNotEnvironment
	}
	if hasDotSegment(escapedPath) {
		return Target{}, ErrInvalid
	}
	rest := escapedPath[len(PathPrefix):]
	ns, rest, named := strings.Cut(rest, "/")
	if !named {
		return Target{}, ErrInvalid
	}
	name, _, more := strings.Cut(rest, "/")
	// Names are plain DNS labels: anything escaped, upper-case or dotted
	// is refused rather than normalised.
	if !validLabel(ns) || !validLabel(name) {
		return Target{}, ErrInvalid
	}
	// Prefix and Rest are slices of the path itself: this runs on every
	// proxied request, and they rebuild it exactly.
	end := len(PathPrefix) + len(ns) + 1 + len(name)
	t := Target{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Prefix: escapedPath[:end]}
	if !more {
		return t, ErrNeedsSlash
	}
	t.Rest = escapedPath[end:]
	return t, nil
}

// hasDotSegment reports "." or ".." segments, also percent-encoded, which
// clients and proxies may resolve differently from the gateway.
func hasDotSegment(escapedPath string) bool {
	for rest := escapedPath; ; {
		seg, after, more := strings.Cut(rest, "/")
		if dots := countDots(seg); dots == 1 || dots == 2 {
			return true
		}
		if !more {
			return false
		}
		rest = after
	}
}

// countDots is how many dots seg is made of, each "." or "%2e" in either
// case, or -1 when it has anything else.
func countDots(seg string) int {
	n := 0
	for seg != "" {
		switch {
		case seg[0] == '.':
			seg = seg[1:]
		case len(seg) >= 3 && seg[0] == '%' && seg[1] == '2' && (seg[2] == 'e' || seg[2] == 'E'):
			seg = seg[3:]
		default:
			return -1
		}
		n++
	}
	return n
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
