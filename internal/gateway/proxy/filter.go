package proxy

import (
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

// stripGatewayCookies removes the gateway's cookies from a request: an
// environment must never see a credential, for itself or for others.
func stripGatewayCookies(h http.Header) {
	lines := h["Cookie"]
	if len(lines) == 0 {
		return
	}
	var b strings.Builder
	for _, line := range lines {
		for rest := line; rest != ""; {
			var part string
			part, rest, _ = strings.Cut(rest, ";")
			part = strings.TrimSpace(part)
			name, _, _ := strings.Cut(part, "=")
			if part == "" || slices.Contains(gatewayCookies, strings.TrimSpace(name)) {
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
