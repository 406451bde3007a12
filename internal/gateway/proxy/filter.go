package proxy

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/userland-dev/userland/internal/gateway/session"
)

// identityHeaderPrefixes are header families that proxies and apps read as
// "who is this": every header starting with one is dropped from client
// requests before the gateway adds its own.
var identityHeaderPrefixes = []string{"X-Forwarded-", "X-Auth-Request-", "X-Remote-", "X-Authenticated-"}

// identityHeaderNames are single identity headers dropped from client
// requests. Forwarded (RFC 7239) is dropped whole: its for/by/host parts are
// set again by the gateway as X-Forwarded-*, and its extensions can carry a
// user.
var identityHeaderNames = []string{"Forwarded", "Remote-User", "Remote-Groups", "Remote-Email", "Remote-Name", "X-User", "X-Email"}

// dropIdentityHeaders removes every identity-looking header a client sent,
// and extra (configured) names. Names are compared case-insensitively and
// with underscores read as hyphens: CGI-style servers (PHP, WSGI behind
// some servers) map both X_Forwarded_User and X-Forwarded-User to
// HTTP_X_FORWARDED_USER, so either spelling would reach an app as the same
// header.
func dropIdentityHeaders(h http.Header, extra []string) {
	for name := range h {
		if isIdentityHeader(name, extra) {
			delete(h, name)
		}
	}
}

func isIdentityHeader(name string, extra []string) bool {
	for _, p := range identityHeaderPrefixes {
		if len(name) >= len(p) && sameHeaderName(name[:len(p)], p) {
			return true
		}
	}
	for _, x := range identityHeaderNames {
		if sameHeaderName(name, x) {
			return true
		}
	}
	for _, x := range extra {
		if x != "" && sameHeaderName(name, x) {
			return true
		}
	}
	return false
}

// sameHeaderName compares two header names as a CGI-style server sees
// them: ASCII case folded, '_' read as '-'. It allocates nothing: it runs
// for every header of every proxied request.
func sameHeaderName(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if headerByte(a[i]) != headerByte(b[i]) {
			return false
		}
	}
	return true
}

func headerByte(c byte) byte {
	switch {
	case c == '_':
		return '-'
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	}
	return c
}

// gatewayCookies are the gateway's own cookie names: never forwarded to an
// environment, never accepted from one.
var gatewayCookies = session.CookieNames()

// OAuth2ProxyCookies are the cookies oauth2-proxy sets under its default
// name: the session "_oauth2_proxy", split into "_oauth2_proxy_0",
// "_oauth2_proxy_1", … when large, and the sign-in's "_oauth2_proxy_csrf"
// ("_oauth2_proxy_csrf_<state>" with --cookie-csrf-per-request). In header
// mode the browser sends them to every host under the proxy's cookie
// domain, environments included, where they are a credential for the
// proxy itself.
var OAuth2ProxyCookies = []string{"_oauth2_proxy", "_oauth2_proxy_*"}

// CookieNames are request cookies no environment may see besides the
// gateway's own: names, and prefixes written with a trailing "*".
type CookieNames struct {
	names, prefixes []string
}

// ParseCookieNames reads a list such as "_oauth2_proxy,_oauth2_proxy_*,
// _shibsession_*"; a bare "*" would drop every cookie and is refused.
func ParseCookieNames(list []string) (CookieNames, error) {
	var c CookieNames
	for _, n := range list {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		prefix, isPrefix := strings.CutSuffix(n, "*")
		if prefix == "" || strings.ContainsAny(prefix, "*=; \t,\"") {
			return CookieNames{}, fmt.Errorf("cookie name %q: want a name, or a name prefix followed by *", n)
		}
		if isPrefix {
			c.prefixes = append(c.prefixes, prefix)
		} else {
			c.names = append(c.names, prefix)
		}
	}
	return c, nil
}

// has reports whether name is one of c's. Cookie names are compared as
// browsers send them: exactly.
func (c *CookieNames) has(name string) bool {
	if c == nil {
		return false
	}
	if slices.Contains(c.names, name) {
		return true
	}
	for _, p := range c.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// dropCookie reports whether a request cookie must not reach an environment.
func dropCookie(name string, extra *CookieNames) bool {
	return slices.Contains(gatewayCookies, name) || extra.has(name)
}

// stripGatewayCookies removes the gateway's cookies from a request: an
// environment must never see a credential, for itself or for others.
func stripGatewayCookies(h http.Header) { stripCookies(h, nil) }

// stripCookies removes the gateway's cookies and extra's from a request.
// A request with one Cookie line and nothing to remove, the common case,
// is left as it is, allocating nothing.
func stripCookies(h http.Header, extra *CookieNames) {
	lines := h["Cookie"]
	if len(lines) == 0 {
		return
	}
	if len(lines) == 1 && !anyDropped(lines[0], extra) {
		return
	}
	var b strings.Builder
	for _, line := range lines {
		for rest := line; rest != ""; {
			var part string
			part, rest, _ = strings.Cut(rest, ";")
			part = strings.TrimSpace(part)
			name, _, _ := strings.Cut(part, "=")
			if part == "" || dropCookie(strings.TrimSpace(name), extra) {
				continue
			}
			if b.Len() > 0 {
				b.WriteString("; ")
			}
			b.WriteString(part)
		}
	}
	if b.Len() == 0 {
		delete(h, "Cookie")
		return
	}
	h["Cookie"] = []string{b.String()}
}

// anyDropped reports whether a Cookie line holds a cookie to remove.
func anyDropped(line string, extra *CookieNames) bool {
	for rest := line; rest != ""; {
		var part string
		part, rest, _ = strings.Cut(rest, ";")
		name, _, _ := strings.Cut(part, "=")
		if dropCookie(strings.TrimSpace(name), extra) {
			return true
		}
	}
	return false
}

// filterResponse removes from an environment's response what would let it
// act beyond itself:
//   - Set-Cookie for any of the gateway's cookie names (session fixation,
//     signing the viewer out, cookie tossing);
//   - the Domain attribute of every cookie, so a cookie stays on the
//     environment's own host and is not tossed to sibling environments
//     under the same domain;
//   - in path routing (cookiePath set), a Path outside the environment's
//     prefix, which is moved under it;
//   - Service-Worker-Allowed, which would widen a service worker's scope
//     beyond the script's own path (over /login, say).
func filterResponse(h http.Header, cookiePath string) {
	h.Del("Service-Worker-Allowed")
	lines := h.Values("Set-Cookie")
	if len(lines) == 0 {
		return
	}
	h.Del("Set-Cookie")
	for _, line := range lines {
		c, err := http.ParseSetCookie(line)
		if err != nil || isGatewayCookie(c.Name) {
			continue
		}
		c.Domain = ""
		if cookiePath != "" && !within(c.Path, cookiePath) {
			c.Path = cookiePath + "/" + strings.TrimPrefix(c.Path, "/")
		}
		v := c.String()
		if v == "" {
			continue
		}
		// String drops a path it cannot write, and a cookie without one
		// would fall back to the browser's default; keep only what still
		// says a path inside the environment's.
		if cookiePath != "" {
			if back, err := http.ParseSetCookie(v); err != nil || !within(back.Path, cookiePath) {
				continue
			}
		}
		h.Add("Set-Cookie", v)
	}
}

// isGatewayCookie compares case-insensitively: some browsers and proxies
// fold cookie names, and a near-miss would still shadow the real one.
func isGatewayCookie(name string) bool {
	for _, g := range gatewayCookies {
		if strings.EqualFold(name, g) {
			return true
		}
	}
	return false
}

// within reports whether cookie path p is prefix or below it.
func within(p, prefix string) bool {
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}
