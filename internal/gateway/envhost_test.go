package gateway_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/echo"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/naming"
)

// hostsFixture is a gateway with environment hosts under apps.test and its
// main host at main.test, both answered by one test server.
type hostsFixture struct {
	fixture
	port string
}

func (h hostsFixture) mainURL() string { return "http://main.test:" + h.port }

func (h hostsFixture) envURL(name string) string {
	return "http://" + naming.HostLabel(h.ns, name) + ".apps.test:" + h.port
}

func setupHosts(t *testing.T) hostsFixture {
	var port string
	f := setup(t, func(s *gateway.Server) {
		s.BaseDomain = "apps.test"
	})
	_, port, _ = net.SplitHostPort(strings.TrimPrefix(f.gateway.URL, "http://"))
	f.server.PublicURL, _ = url.Parse("http://main.test:" + port)
	return hostsFixture{fixture: f, port: port}
}

// hostBrowser keeps cookies per host, as a browser does, follows
// redirects, and reaches every host through the test gateway.
func (h hostsFixture) browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	addr := strings.TrimPrefix(h.gateway.URL, "http://")
	return &http.Client{Jar: jar, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
}

func navigate(t *testing.T, c *http.Client, u string, header map[string]string) (*http.Response, string) {
	t.Helper()
	return get(t, c, u, mergeHeaders(map[string]string{"Sec-Fetch-Mode": "navigate", "Accept": "text/html"}, header))
}

func mergeHeaders(a, b map[string]string) map[string]string {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// signInThroughHandoff opens an environment host signed out and signs in
// on the main host's form, as a browser following the redirects would.
func (h hostsFixture) signInThroughHandoff(t *testing.T, c *http.Client, user, pw, env string) *http.Response {
	t.Helper()
	return h.signInThroughHandoffTo(t, c, user, pw, h.envURL(env)+"/lab?x=1")
}

// signInThroughHandoffTo is signInThroughHandoff starting at any address.
func (h hostsFixture) signInThroughHandoffTo(t *testing.T, c *http.Client, user, pw, start string) *http.Response {
	t.Helper()
	resp, body := navigate(t, c, start, nil)
	if resp.Request.URL.Host != "main.test:"+h.port || resp.Request.URL.Path != "/login" || !strings.Contains(body, "Sign in") {
		t.Fatalf("signed-out environment host led to %s (%s), want the main host's sign-in form", resp.Request.URL, resp.Status)
	}
	form := url.Values{"username": {user}, "password": {pw}, "rd": {resp.Request.URL.Query().Get("rd")}}
	resp, err := c.PostForm(h.mainURL()+"/login", form)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp
}

func TestEnvironmentHostsSignInThroughTheHandoff(t *testing.T) {
	t.Parallel()
	h := setupHosts(t)
	c := h.browser(t)
	resp := h.signInThroughHandoff(t, c, "alice", "alice-pw", "alice")
	if resp.StatusCode != http.StatusOK || resp.Request.URL.String() != h.envURL("alice")+"/lab?x=1" {
		t.Fatalf("after sign-in: %s at %s, want 200 at alice's /lab?x=1", resp.Status, resp.Request.URL)
	}
	resp, body := get(t, c, h.envURL("alice")+"/lab", map[string]string{"X-Forwarded-Preferred-Username": "bob", "X-Auth-Request-User": "bob", "Remote-User": "bob"})
	var seen echo.Reply
	_ = json.Unmarshal([]byte(body), &seen)
	if resp.StatusCode != http.StatusOK || seen.User != "alice" {
		t.Fatalf("alice's environment: %s %s", resp.Status, body)
	}
	for _, name := range session.CookieNames() {
		if strings.Contains(seen.Cookie, name+"=") {
			t.Errorf("the environment received the gateway's cookie %s: %q", name, seen.Cookie)
		}
	}
	// The main host's session and the environment's cookie are separate,
	// host-only cookies.
	envU, _ := url.Parse(h.envURL("alice"))
	mainU, _ := url.Parse(h.mainURL())
	if got := cookieHeader(c, envU); strings.Contains(got, session.CookieName+"=") || !strings.Contains(got, "userland_env=") {
		t.Errorf("cookies on the environment host: %q", got)
	}
	if got := cookieHeader(c, mainU); strings.Contains(got, "userland_env=") {
		t.Errorf("the environment cookie reached the main host: %q", got)
	}

	t.Run("another user's environment host is not found after sign-in", func(t *testing.T) {
		resp, _ := navigate(t, c, h.envURL("bob")+"/", nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob's host as alice: %s at %s, want 404", resp.Status, resp.Request.URL)
		}
		resp, _ = navigate(t, c, "http://nobody-abcdef012345.apps.test:"+h.port+"/", nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("a host naming no environment: %s, want the same 404", resp.Status)
		}
	})
	t.Run("alice's environment cookie replayed on bob's host opens nothing", func(t *testing.T) {
		jar, _ := cookiejar.New(nil)
		bobU, _ := url.Parse(h.envURL("bob"))
		jar.SetCookies(bobU, c.Jar.Cookies(envU))
		thief := h.browser(t)
		thief.Jar = jar
		resp, body := get(t, thief, h.envURL("bob")+"/", map[string]string{"Accept": "application/json"})
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, `"user"`) {
			t.Errorf("replayed cookie on bob's host: %s %s", resp.Status, body)
		}
	})
	t.Run("a hostile response cannot set the gateway's cookies or widen a service worker", func(t *testing.T) {
		resp, _ := get(t, c, h.envURL("alice")+"/hostile", nil)
		if sw := resp.Header.Get("Service-Worker-Allowed"); sw != "" {
			t.Errorf("Service-Worker-Allowed %q passed", sw)
		}
		for _, sc := range resp.Header.Values("Set-Cookie") {
			if strings.HasPrefix(sc, session.CookieName) || strings.Contains(strings.ToLower(sc), "domain=") {
				t.Errorf("Set-Cookie %q passed", sc)
			}
		}
		if got := cookieHeader(c, mainU); strings.Contains(got, "forged") {
			t.Errorf("the main host's cookies now hold %q", got)
		}
	})
	t.Run("a hand-off token cannot be replayed", func(t *testing.T) {
		noRedirect := h.browser(t)
		noRedirect.Jar = c.Jar
		noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, _ := get(t, noRedirect, h.envURL("alice")+"/.userland/handoff?token=forged&rd=/", nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("forged token: %s, want 400", resp.Status)
		}
	})
}

func TestCrossOriginRequestsIntoAnEnvironmentAreRefused(t *testing.T) {
	h := setupHosts(t)
	c := h.browser(t)
	h.signInThroughHandoff(t, c, "alice", "alice-pw", "alice")
	alice := h.envURL("alice")
	before := upstreamPosts.Load()
	post := func(origin string) int {
		req, _ := http.NewRequest(http.MethodPost, alice+"/api/kernels", strings.NewReader("{}"))
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for origin, want := range map[string]int{
		h.envURL("bob"):       http.StatusForbidden,
		"http://evil.example": http.StatusForbidden,
		"null":                http.StatusForbidden,
		"https://" + strings.TrimPrefix(alice, "http://"): http.StatusForbidden,
		alice:       http.StatusOK,
		h.mainURL(): http.StatusOK,
		"":          http.StatusOK,
	} {
		if got := post(origin); got != want {
			t.Errorf("POST with Origin %q: %d, want %d", origin, got, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(alice, "http") + "/ws"
	_, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: c, HTTPHeader: http.Header{"Origin": {h.envURL("bob")}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin WebSocket: %v %v, want 403", err, resp)
	}
	conn, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: c, HTTPHeader: http.Header{"Origin": {alice}}})
	if err != nil {
		t.Fatalf("same-origin WebSocket: %v", err)
	}
	_, msg, err := conn.Read(ctx)
	if err != nil || string(msg) != "hello alice" {
		t.Errorf("same-origin WebSocket said %q, %v", msg, err)
	}
	_ = conn.CloseNow()
	// Only the three allowed POSTs reached the environment: refusals
	// happen before any upstream dial.
	if got := upstreamPosts.Load() - before; got != 3 {
		t.Errorf("the environment saw %d POSTs, want the 3 allowed ones", got)
	}
}

// TestFetchMetadataKeepsOtherSitesOut sends what Chromium sends for each
// kind of request another site's page (another environment's included) can
// make into alice's environment: only a top-level navigation, as a link
// would, gets through.
func TestFetchMetadataKeepsOtherSitesOut(t *testing.T) {
	h := setupHosts(t)
	c := h.browser(t)
	h.signInThroughHandoff(t, c, "alice", "alice-pw", "alice")
	cases := []struct {
		name               string
		method, site, mode string
		dest, origin       string
		want               int
		reachesEnvironment bool
	}{
		{"image from another environment", "GET", "same-site", "no-cors", "image", "", http.StatusForbidden, false},
		{"fetch from another site", "GET", "cross-site", "cors", "empty", "http://evil.example", http.StatusForbidden, false},
		{"no-cors fetch from another site", "GET", "cross-site", "no-cors", "empty", "", http.StatusForbidden, false},
		{"script from another site", "GET", "cross-site", "no-cors", "script", "", http.StatusForbidden, false},
		{"frame in another site's page", "GET", "cross-site", "navigate", "iframe", "", http.StatusForbidden, false},
		{"form post from another site", "POST", "cross-site", "navigate", "document", "http://evil.example", http.StatusForbidden, false},
		{"link from another site", "GET", "cross-site", "navigate", "document", "", http.StatusOK, true},
		{"address bar", "GET", "none", "navigate", "document", "", http.StatusOK, true},
		{"the environment's own fetch", "GET", "same-origin", "cors", "empty", "", http.StatusOK, true},
		// Chromium's form post from a page with Referrer-Policy: no-referrer
		// (phpMyAdmin's sign-in), found by the real-app browser test.
		{"the environment's own no-referrer form", "POST", "same-origin", "navigate", "document", "null", http.StatusOK, true},
		{"a sandboxed frame's form", "POST", "cross-site", "navigate", "iframe", "null", http.StatusForbidden, false},
		{"fetch from the dashboard", "GET", "cross-site", "cors", "empty", h.mainURL(), http.StatusOK, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := upstreamSecrets.Load()
			req, _ := http.NewRequest(tc.method, h.envURL("alice")+"/secret", nil)
			req.Header.Set("Sec-Fetch-Site", tc.site)
			req.Header.Set("Sec-Fetch-Mode", tc.mode)
			req.Header.Set("Sec-Fetch-Dest", tc.dest)
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %s, want %d", resp.Status, tc.want)
			}
			if got := upstreamSecrets.Load() - before; (got > 0) != tc.reachesEnvironment {
				t.Errorf("the environment saw %d requests, want reached=%v", got, tc.reachesEnvironment)
			}
		})
	}
}

// TestHostsOfLookAlikeAndLongNamesStayApart creates, in the simulated
// cluster, the two Userlands whose readable hosts would meet (a in p--q
// and a--p in q) and one whose readable host would pass 63 characters;
// each owner reaches exactly their own environment on its own host.
func TestHostsOfLookAlikeAndLongNamesStayApart(t *testing.T) {
	t.Parallel()
	h := setupHosts(t)
	ctx := context.Background()
	suffix := strings.ToLower(strings.ReplaceAll(t.Name()[:4], "_", ""))
	p, q := "p"+suffix+randomHex(t), "q"+suffix+randomHex(t)
	long := strings.Repeat("n", 56) + randomHex(t)
	type placed struct{ ns, name, owner, pw string }
	envs := []placed{
		{p + "--" + q, "a", "alice", "alice-pw"},
		{q, "a--" + p, "bob", "bob-pw"},
		{long[:63], "l" + long[:62], "carol", "carol-pw"},
	}
	if got, other := naming.HostLabel(envs[0].ns, envs[0].name), naming.HostLabel(envs[1].ns, envs[1].name); got == other {
		t.Fatalf("both look-alikes got host %s", got)
	}
	for _, e := range envs {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}); err != nil {
			t.Fatal(err)
		}
		tmpl := &v1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "web"}}
		var base v1alpha1.Template
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "web"}, &base); err != nil {
			t.Fatal(err)
		}
		tmpl.Spec = base.Spec
		ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: e.name},
			Spec: v1alpha1.UserlandSpec{User: e.owner, TemplateRef: v1alpha1.TemplateReference{Name: "web"}}}
		for _, o := range []client.Object{tmpl, ul} {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, e := range envs {
		env.WaitPhase(t, e.ns, e.name, v1alpha1.PhaseReady)
	}
	for i, e := range envs {
		label := naming.HostLabel(e.ns, e.name)
		if len(label) > 63 {
			t.Errorf("%s/%s: host label %q has %d characters", e.ns, e.name, label, len(label))
		}
		u := "http://" + label + ".apps.test:" + h.port
		c := h.browser(t)
		resp := h.signInThroughHandoffTo(t, c, e.owner, e.pw, u)
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Host != label+".apps.test:"+h.port {
			t.Errorf("%s on %s: %s at %s", e.owner, label, resp.Status, resp.Request.URL)
			continue
		}
		other := envs[(i+1)%len(envs)]
		resp, _ = navigate(t, c, "http://"+naming.HostLabel(other.ns, other.name)+".apps.test:"+h.port+"/", nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s on %s/%s's host: %s, want 404", e.owner, other.ns, other.name, resp.Status)
		}
		t.Logf("%s/%s → %s", e.ns, e.name, label)
	}
}

func randomHex(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
