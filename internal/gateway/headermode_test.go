package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/userland-dev/userland/internal/echo"
	"github.com/userland-dev/userland/internal/gateway"
)

// oauth2ProxyCookies is what a browser signed in through oauth2-proxy
// sends to every host under the proxy's cookie domain: the session split
// into chunks (_oauth2_proxy_0, _1; a small one is _oauth2_proxy), the
// sign-in's CSRF cookies (per request, with --cookie-csrf-per-request), a
// university single sign-on's session on the shared parent domain, and
// the environment's own cookies.
const oauth2ProxyCookies = "_oauth2_proxy_0=c2Vzc2lvbi1wYXJ0LTE|1700000000|sig; _oauth2_proxy_1=c2Vzc2lvbi1wYXJ0LTI; " +
	"_oauth2_proxy=c21hbGwtc2Vzc2lvbg|1700000000|sig; _oauth2_proxy_csrf=Y3NyZg|1700000000|sig; " +
	"_oauth2_proxy_csrf_0d1e2f3a=Y3NyZjI|1700000000|sig; _shibsession_64656661756c74=_a1b2c3; " +
	"_xsrf=2|abc|def|1700000000; jupyterhub-session-id=0123abcd"

// TestHeaderModeKeepsTheProxysCredentialsFromEnvironments: behind
// oauth2-proxy the browser's cookies for the proxy (and for a single
// sign-on on the parent domain) reach every environment host, and so
// does an Authorization header the proxy may set (--pass-authorization-
// header). With them an environment's code could act as the user at the
// proxy or the SSO. None reach the environment, unless configured to.
func TestHeaderModeKeepsTheProxysCredentialsFromEnvironments(t *testing.T) {
	t.Parallel()
	headerMode := func(o *gateway.Options) {
		o.AuthMode = "header"
		o.TrustedUserHeader, o.TrustedEmailHeader, o.TrustedGroupsHeader = "X-Forwarded-User", "X-Forwarded-Email", "X-Forwarded-Groups"
		o.TrustedProxies = []string{"127.0.0.1/32"}
		o.DropCookies = []string{"_shibsession_*"}
	}
	for name, tc := range map[string]struct {
		options           func(*gateway.Options)
		wantCookie        string
		wantAuthorization string
	}{
		"by default": {
			options:    headerMode,
			wantCookie: "_xsrf=2|abc|def|1700000000; jupyterhub-session-id=0123abcd",
		},
		"when configured to pass them": {
			options: func(o *gateway.Options) {
				headerMode(o)
				o.ForwardOAuth2ProxyCookies, o.ForwardAuthorization = true, true
			},
			wantCookie: "_oauth2_proxy_0=c2Vzc2lvbi1wYXJ0LTE|1700000000|sig; _oauth2_proxy_1=c2Vzc2lvbi1wYXJ0LTI; " +
				"_oauth2_proxy=c21hbGwtc2Vzc2lvbg|1700000000|sig; _oauth2_proxy_csrf=Y3NyZg|1700000000|sig; " +
				"_oauth2_proxy_csrf_0d1e2f3a=Y3NyZjI|1700000000|sig; _xsrf=2|abc|def|1700000000; jupyterhub-session-id=0123abcd",
			wantAuthorization: "Bearer eyJhbGciOiJSUzI1NiJ9.idp.token",
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := setupWith(t, tc.options, nil)
			resp, body := get(t, http.DefaultClient, f.gateway.URL+"/u/"+f.ns+"/alice/", map[string]string{
				"X-Forwarded-User": "alice", "Cookie": oauth2ProxyCookies,
				"Authorization": "Bearer eyJhbGciOiJSUzI1NiJ9.idp.token",
			})
			var seen echo.Reply
			if err := json.Unmarshal([]byte(body), &seen); resp.StatusCode != http.StatusOK || err != nil {
				t.Fatalf("%s %.300s", resp.Status, body)
			}
			if seen.User != "alice" {
				t.Errorf("the environment saw user %q", seen.User)
			}
			if diff := cmp.Diff(tc.wantCookie, seen.Cookie); diff != "" {
				t.Errorf("Cookie the environment saw (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAuthorization, seen.Headers.Get("Authorization")); diff != "" {
				t.Errorf("Authorization the environment saw (-want +got):\n%s", diff)
			}
		})
	}
}
