package proxy

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// FuzzFilterResponse feeds an environment's Set-Cookie lines and the
// environment's cookie path: whatever the environment sends, no gateway
// cookie (in any letter case), no Domain attribute, no path outside the
// environment's prefix and no Service-Worker-Allowed reach the browser.
func FuzzFilterResponse(f *testing.F) {
	for _, seed := range []struct{ line, path string }{
		{"userland_session=forged; Path=/", "/u/ns/a"},
		{"USERLAND_SESSION=x; Domain=apps.test", ""},
		{"app=1; Path=/u/ns/a/x; Domain=.apps.test; HttpOnly", "/u/ns/a"},
		{"a=b; Path=/../../login", "/u/ns/a"},
		{"__Host-userland_env=e; Secure; Path=/", ""},
		{"x=\"quoted\"; Max-Age=0; Path=", "/u/ns/a"},
	} {
		f.Add(seed.line, seed.path)
	}
	f.Fuzz(func(t *testing.T, line, cookiePath string) {
		if cookiePath != "" && (!strings.HasPrefix(cookiePath, "/") || strings.HasSuffix(cookiePath, "/")) {
			return // the gateway passes "" or a prefix like /u/ns/name
		}
		h := http.Header{"Set-Cookie": strings.Split(line, "\n"), "Service-Worker-Allowed": {"/"}}
		filterResponse(h, cookiePath)
		if h.Get("Service-Worker-Allowed") != "" {
			t.Fatal("Service-Worker-Allowed passed")
		}
		for _, out := range h.Values("Set-Cookie") {
			c, err := http.ParseSetCookie(out)
			if err != nil {
				t.Fatalf("%q became an unparsable %q: %v", line, out, err)
			}
			if isGatewayCookie(c.Name) {
				t.Fatalf("%q let the gateway's cookie %q through", line, c.Name)
			}
			if c.Domain != "" {
				t.Fatalf("%q kept Domain=%q", line, c.Domain)
			}
			if cookiePath != "" && c.Path != cookiePath && !strings.HasPrefix(c.Path, cookiePath+"/") {
				t.Fatalf("%q kept Path=%q outside %q", line, c.Path, cookiePath)
			}
		}
	})
}

// FuzzRequestFilters feeds a client's header name and value and its Cookie
// line, filtered as in header mode behind oauth2-proxy with a single
// sign-on cookie family configured too: no identity header family, no
// Authorization, no gateway cookie and no configured cookie (oauth2-proxy's
// session, its chunks and CSRF cookies, the SSO's) reach an environment,
// and every other cookie is kept.
func FuzzRequestFilters(f *testing.F) {
	f.Add("X-Forwarded-User", "bob", "userland_session=s; app=1")
	f.Add("x-forwarded-preferred-username", "bob", "__Host-userland_env=e;_xsrf=2")
	f.Add("Remote-User", "root", " userland_handoff = n ; a=b")
	f.Add("Forwarded", "for=1.2.3.4;user=bob", "")
	f.Add("X_Forwarded_User", "bob", "")
	f.Add("Authorization", "Bearer idp-token", "_oauth2_proxy=s; _oauth2_proxy_0=a; _oauth2_proxy_1=b; app=1")
	f.Add("Accept", "*/*", "_oauth2_proxy_csrf=c;_oauth2_proxy_csrf_0a1b2c3d=d; _shibsession_abc=x ;_xsrf=2")
	configured, err := ParseCookieNames(append(slices.Clone(OAuth2ProxyCookies), "_shibsession_*"))
	if err != nil {
		f.Fatal(err)
	}
	dropped := func(n string) bool {
		return slices.Contains(gatewayCookies, n) || n == "_oauth2_proxy" ||
			strings.HasPrefix(n, "_oauth2_proxy_") || strings.HasPrefix(n, "_shibsession_")
	}
	p := &Proxy{DropCookies: configured, DropAuthorization: true}
	f.Fuzz(func(t *testing.T, name, value, cookie string) {
		h := http.Header{}
		h.Add(name, value)
		h.Add("Cookie", cookie)
		sent := strings.Join(h.Values("Cookie"), ";")
		dropIdentityHeaders(h, nil)
		if p.DropAuthorization {
			h.Del("Authorization")
		}
		stripCookies(h, &p.DropCookies)
		if h.Get("Authorization") != "" {
			t.Fatal("Authorization passed")
		}
		// As a CGI-style server reads names: any case, "_" for "-".
		cgi := func(s string) string { return strings.ToUpper(strings.NewReplacer("-", "_").Replace(s)) }
		for got := range h {
			for _, p := range identityHeaderPrefixes {
				if strings.HasPrefix(cgi(got), cgi(p)) {
					t.Fatalf("identity header %q passed", got)
				}
			}
			for _, n := range identityHeaderNames {
				if cgi(got) == cgi(n) {
					t.Fatalf("identity header %q passed", got)
				}
			}
		}
		var kept []string
		for _, line := range h.Values("Cookie") {
			for _, part := range strings.Split(line, ";") {
				n, _, _ := strings.Cut(strings.TrimSpace(part), "=")
				if n = strings.TrimSpace(n); dropped(n) {
					t.Fatalf("cookie %q passed in %q", n, line)
				}
				if strings.TrimSpace(part) != "" {
					kept = append(kept, strings.TrimSpace(part))
				}
			}
		}
		// Every other cookie is kept, as it was sent.
		var want []string
		for _, part := range strings.Split(sent, ";") {
			n, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if strings.TrimSpace(part) != "" && !dropped(strings.TrimSpace(n)) {
				want = append(want, strings.TrimSpace(part))
			}
		}
		if !slices.Equal(want, kept) {
			t.Fatalf("from %q kept %q, want %q", cookie, kept, want)
		}
	})
}
