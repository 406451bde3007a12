package proxy

import (
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDropIdentityHeaders(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	for _, name := range []string{
		"X-Forwarded-User", "X-Forwarded-Preferred-Username", "X-Forwarded-Access-Token", "X-Auth-Request-User",
		"X-Auth-Request-Preferred-Username", "Remote-User", "X-Remote-User", "X-Remote-Group", "Forwarded",
		"X-Userland-Proxy-Secret", "Accept", "X-Requested-With", "X_Forwarded_User", "remote_user", "X_AUTH_REQUEST_EMAIL",
		"X_Userland_Proxy_Secret",
	} {
		h.Set(name, "bob")
	}
	dropIdentityHeaders(h, []string{"X-Userland-Proxy-Secret"})
	if diff := cmp.Diff([]string{"Accept", "X-Requested-With"}, slices.Sorted(maps.Keys(h))); diff != "" {
		t.Errorf("headers left (-want +got):\n%s", diff)
	}
}

func TestStripGatewayCookies(t *testing.T) {
	t.Parallel()
	h := http.Header{"Cookie": {"userland_session=s; app=1", "__Host-userland_env=e; userland_handoff=n; _xsrf=2; userland_oauth=o"}}
	stripGatewayCookies(h)
	if diff := cmp.Diff([]string{"app=1; _xsrf=2"}, h.Values("Cookie")); diff != "" {
		t.Errorf("Cookie (-want +got):\n%s", diff)
	}
}

// TestStripConfiguredCookies: behind oauth2-proxy (header mode) the
// browser sends the proxy's cookies, and on a shared parent domain a
// single sign-on's, to every environment host; none reaches the app, and
// the app's own cookies do, including look-alikes.
func TestStripConfiguredCookies(t *testing.T) {
	t.Parallel()
	names, err := ParseCookieNames(append(slices.Clone(OAuth2ProxyCookies), "_shibsession_*", "MOD_AUTH_CAS"))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		cookie []string
		want   []string
	}{
		"oauth2-proxy's session, CSRF and split session": {
			cookie: []string{"_oauth2_proxy=s; _xsrf=2", "_oauth2_proxy_0=a; _oauth2_proxy_1=b; _oauth2_proxy_csrf=c; _oauth2_proxy_csrf_0d1e2f3a=c2; app=1"},
			want:   []string{"_xsrf=2; app=1"},
		},
		"a university single sign-on": {
			cookie: []string{"_shibsession_64656661756c74=x; MOD_AUTH_CAS=y; jupyterhub-session-id=z"},
			want:   []string{"jupyterhub-session-id=z"},
		},
		"look-alikes are the app's": {
			cookie: []string{"_oauth2_proxyish=1; oauth2_proxy=2; x_oauth2_proxy=3; mod_auth_cas=4"},
			want:   []string{"_oauth2_proxyish=1; oauth2_proxy=2; x_oauth2_proxy=3; mod_auth_cas=4"},
		},
		"nothing left": {
			cookie: []string{"_oauth2_proxy=s", "userland_session=t"},
			want:   nil,
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := http.Header{"Cookie": tc.cookie}
			stripCookies(h, &names)
			if diff := cmp.Diff(tc.want, h.Values("Cookie")); diff != "" {
				t.Errorf("Cookie (-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []string{"*", "a=b*", "two words"} {
		if _, err := ParseCookieNames([]string{bad}); err == nil {
			t.Errorf("ParseCookieNames(%q) accepted it", bad)
		}
	}
}

// A request whose cookies are all the app's is passed on untouched,
// allocating nothing: the filter runs on every proxied request.
func TestStripCookiesAllocatesNothingWhenNothingIsDropped(t *testing.T) {
	names, _ := ParseCookieNames(OAuth2ProxyCookies)
	h := http.Header{"Cookie": {"_xsrf=2|abc; jupyterhub-session-id=z; theme=dark"}}
	if n := testing.AllocsPerRun(100, func() { stripCookies(h, &names) }); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}

func TestFilterResponse(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		setCookies []string
		cookiePath string
		want       []string
	}{
		"the gateway's cookies are dropped, in any case": {
			setCookies: []string{"userland_session=forged; Path=/", "USERLAND_SESSION=x", "__Host-userland_env=x; Path=/; Secure", "userland_handoff=x"},
			want:       nil,
		},
		"a cookie's Domain is removed, so it stays on the environment's host": {
			setCookies: []string{"app=1; Domain=apps.example.edu; Path=/; HttpOnly"},
			want:       []string{"app=1; Path=/; HttpOnly"},
		},
		"path routing confines cookies under the prefix": {
			setCookies: []string{"a=1; Path=/", "b=2", "c=3; Path=/u/ns/alice/lab", "d=4; Path=/u/ns/alicex"},
			cookiePath: "/u/ns/alice",
			want:       []string{"a=1; Path=/u/ns/alice/", "b=2; Path=/u/ns/alice/", "c=3; Path=/u/ns/alice/lab", "d=4; Path=/u/ns/alice/u/ns/alicex"},
		},
		"unparseable lines are dropped": {
			setCookies: []string{"=novalue", "ok=1"},
			want:       []string{"ok=1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := http.Header{"Set-Cookie": tc.setCookies, "Service-Worker-Allowed": {"/"}}
			filterResponse(h, tc.cookiePath)
			if diff := cmp.Diff(tc.want, h.Values("Set-Cookie")); diff != "" {
				t.Errorf("Set-Cookie (-want +got):\n%s", diff)
			}
			if h.Get("Service-Worker-Allowed") != "" {
				t.Error("Service-Worker-Allowed passed")
			}
		})
	}
}
