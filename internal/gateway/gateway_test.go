package gateway_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	testingclock "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/echo"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/gateway/proxy"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

var (
	env   *testenv.Environment
	clock = testingclock.NewFakePassiveClock(time.Now())
)

// TestMain runs the full simulated cluster with the controller, so wake-up
// is the real controller scaling a real Deployment.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Mode: testenv.Full}, &env))
}

var startOnce sync.Once

// startController starts the package's one controller, on first use: the
// gateway's tests need its wakes and starts, not a controller of their
// own. It stops with the environment.
func startController(t *testing.T) {
	t.Helper()
	var err error
	startOnce.Do(func() {
		var mgr ctrl.Manager
		mgr, err = controller.NewManager(env.Config, controller.Options{
			MetricsAddr: "0", ProbeAddr: "0", Workers: 4, GatewaySelector: "app=gw", GatewayNamespace: "userland-system",
			Clock: clock, Registry: prometheus.NewRegistry(), RolloutIdleAfter: time.Hour,
		})
		if err == nil {
			env.RunManager(mgr)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// upstreamPosts counts POSTs that reached any test upstream, and
// upstreamSecrets requests for its /secret path.
var upstreamPosts, upstreamSecrets atomic.Int32

// upstream is the echo app answering for every environment, counting
// what reached it, with a hostile page added.
func upstream(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	// A hostile app's response: it tries to plant the gateway's session,
	// toss a cookie to sibling environments and widen a service worker.
	mux.HandleFunc("/hostile", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", session.CookieName+"=forged; Path=/")
		w.Header().Add("Set-Cookie", "tossed=1; Domain=apps.test; Path=/")
		w.Header().Set("Service-Worker-Allowed", "/")
		_, _ = w.Write([]byte("hostile"))
	})
	// An upload the app reads whole, answering with what it got.
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		upstreamPosts.Add(1)
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading the upload: "+err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write(b)
	})
	app := echo.Handler()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			upstreamPosts.Add(1)
		}
		if r.URL.Path == "/secret" {
			upstreamSecrets.Add(1)
		}
		app.ServeHTTP(w, r)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

type fixture struct {
	ns      string
	gateway *httptest.Server
	server  *gateway.Server
	metrics *prometheus.Registry
}

// metric returns the value of a counter or gauge with the given labels.
func (f fixture) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := f.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	next:
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func hashPW(t *testing.T, pw string) string {
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

// setup creates alice's and bob's environments and a gateway in front.
func setup(t *testing.T, mutate func(*gateway.Server)) fixture {
	t.Helper()
	return setupWith(t, nil, mutate)
}

// setupWith is setup with the gateway's options changed by options first.
func setupWith(t *testing.T, options func(*gateway.Options), mutate func(*gateway.Server)) fixture {
	t.Helper()
	startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	objs := []client.Object{testobj.MakeTemplate(ns, "web").Container("web").Idle(5 * time.Minute).Obj()}
	for _, u := range []string{"alice", "bob"} {
		objs = append(objs, testobj.MakeUserland(ns, u, u, "web").Obj())
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"alice", "bob"} {
		env.WaitPhase(t, ns, u, v1alpha1.PhaseReady)
	}

	// The gateway's side runs under the shipped userland-gateway role
	// only: a ServiceAccount's name, as the chart runs it (the webhook lets
	// a ServiceAccount record the person a grant is for).
	c, gwConfig := gatewayCache(t, "system:serviceaccount:userland-system:gateway-under-test")
	gwClient, err := client.New(gwConfig, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	// The gateway is built as the manager builds it, from options and files.
	dir := t.TempDir()
	usersFile := filepath.Join(dir, "users.yaml")
	users := ""
	for _, u := range []struct{ name, email, group string }{{"alice", "", ""}, {"bob", "", ""}, {"root", "", "admins"}, {"carol", "carol@uni.example.ac.jp", ""},
		{"oliver", "oliver@once.example.ac.jp", ""}} {
		users += fmt.Sprintf("  - name: %s\n    passwordHash: %q\n", u.name, hashPW(t, u.name+"-pw"))
		if u.email != "" {
			users += fmt.Sprintf("    email: %s\n", u.email)
		}
		if u.group != "" {
			users += fmt.Sprintf("    groups: [%s]\n", u.group)
		}
	}
	if err := os.WriteFile(usersFile, []byte("users:\n"+users), 0o600); err != nil {
		t.Fatal(err)
	}
	keysFile := filepath.Join(dir, "session.keys")
	key := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("h", 32) + strings.Repeat("b", 32)))
	if err := os.WriteFile(keysFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	up := upstream(t)
	reg := prometheus.NewRegistry()
	opts := gateway.Options{
		AuthMode: "static", StaticUsersFile: usersFile, SessionKeysFile: keysFile, SessionTTL: time.Hour, InsecureCookies: true,
		AdminGroups: []string{"admins"}, WakeTimeout: time.Minute,
		Resolver: &gateway.StaticResolver{Default: strings.TrimPrefix(up.URL, "http://")},
	}
	if options != nil {
		options(&opts)
	}
	srv, err := gateway.NewServer(opts, gateway.Deps{Reader: c, Writer: gwClient, Events: gwClient, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(srv)
	}
	gw := httptest.NewServer(srv.Handler(logr.Discard()))
	t.Cleanup(gw.Close)
	return fixture{ns: ns, gateway: gw, server: srv, metrics: reg}
}

// waitCached waits until the gateway's cache shows every one of objs.
func (f fixture) waitCached(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		into := o.DeepCopyObject().(client.Object)
		err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			return f.server.Reader.Get(ctx, client.ObjectKeyFromObject(o), into) == nil, nil
		})
		if err != nil {
			t.Fatalf("%T %s never reached the gateway's cache", o, o.GetName())
		}
	}
}

// failPod makes the environment's one pod report its container stuck in
// waiting, as a kubelet would, retrying if kwok writes the pod meanwhile.
func failPod(t *testing.T, ns, userland string, waiting corev1.ContainerStateWaiting) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelUserland: userland}); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%s has %d pods, want 1", userland, len(pods.Items))
		}
		pod := pods.Items[0].DeepCopy()
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Waiting: &waiting}}}
		return env.Client.Status().Update(ctx, pod)
	})
	if err != nil {
		t.Fatalf("failing %s's pod: %v", userland, err)
	}
}

// browser is a client that keeps cookies and does not follow redirects.
func browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func signIn(t *testing.T, c *http.Client, gw, user, pw string) {
	t.Helper()
	resp, err := c.PostForm(gw+"/login", url.Values{"username": {user}, "password": {pw}, "rd": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in as %s: %s", user, resp.Status)
	}
}

func get(t *testing.T, c *http.Client, u string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestSignInThenReachOwnEnvironment(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := browser(t)
	envURL := f.gateway.URL + "/u/" + f.ns + "/alice/notebooks/x?y=1"

	resp, _ := get(t, c, envURL, map[string]string{"Accept": "text/html"})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "/login?rd=") {
		t.Fatalf("unauthenticated navigation: %s to %q, want a redirect to /login", resp.Status, loc)
	}
	resp, err := c.PostForm(f.gateway.URL+"/login", url.Values{"username": {"alice"}, "password": {"wrong"}, "rd": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong password: %s", resp.Status)
	}
	rd, _ := url.Parse(loc)
	resp, err = c.PostForm(f.gateway.URL+"/login", url.Values{"username": {"alice"}, "password": {"alice-pw"}, "rd": {rd.Query().Get("rd")}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if got := resp.Header.Get("Location"); got != "/u/"+f.ns+"/alice/notebooks/x?y=1" {
		t.Errorf("after sign-in redirected to %q", got)
	}

	resp, body := get(t, c, envURL, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("own environment: %s %s", resp.Status, body)
	}
	var got echo.Reply
	_ = json.Unmarshal([]byte(body), &got)
	if got.User != "alice" || got.Path != "/notebooks/x" || strings.Contains(got.Cookie, session.CookieName) {
		t.Errorf("upstream saw %v", got)
	}
	if n := f.metric(t, "userland_gateway_signin_failures_total", map[string]string{"reason": "bad_credentials"}); n != 1 {
		t.Errorf("sign-in failures counted %v, want 1", n)
	}
	// The count is taken after the response is written, so the client can
	// be faster than the counter.
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return f.metric(t, "userland_gateway_requests_total", map[string]string{"code": "200"}) >= 1, nil
	})
	if err != nil {
		t.Error("200 responses were never counted")
	}
}

func TestNobodyReachesAnotherUsersEnvironment(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	bob := browser(t)
	signIn(t, bob, f.gateway.URL, "bob", "bob-pw")
	alice := "/u/" + f.ns + "/alice/"

	cases := map[string]struct {
		path   string
		header map[string]string
		want   int
	}{
		"directly":                   {alice, nil, http.StatusNotFound},
		"spoofed identity header":    {alice, map[string]string{"X-Forwarded-User": "alice"}, http.StatusNotFound},
		"dot-dot from own":           {"/u/" + f.ns + "/bob/../alice/", nil, http.StatusBadRequest},
		"encoded dot-dot":            {"/u/" + f.ns + "/bob/%2e%2e/alice/", nil, http.StatusBadRequest},
		"encoded slash":              {"/u/" + f.ns + "/bob%2Falice/", nil, http.StatusBadRequest},
		"double-encoded slash":       {"/u/" + f.ns + "/bob%252F..%252Falice/", nil, http.StatusBadRequest},
		"case change":                {"/u/" + f.ns + "/Alice/", nil, http.StatusBadRequest},
		"trailing dot":               {"/u/" + f.ns + "/alice./", nil, http.StatusBadRequest},
		"nonexistent looks the same": {"/u/" + f.ns + "/nobody/", nil, http.StatusNotFound},
		"host header for subdomain":  {"/u/" + f.ns + "/bob/", map[string]string{"Host": "alice--" + f.ns + ".example.edu"}, http.StatusOK},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, f.gateway.URL+tc.path, nil)
			for k, v := range tc.header {
				if k == "Host" {
					// The cookie jar picks cookies by the Host; send bob's
					// session explicitly.
					req.Host = v
					u, _ := url.Parse(f.gateway.URL)
					req.Header.Set("Cookie", cookieHeader(bob, u))
				} else {
					req.Header.Set(k, v)
				}
			}
			resp, err := bob.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("%s: %s %s, want %d", tc.path, resp.Status, body, tc.want)
			}
			if strings.Contains(string(body), `"user":"alice"`) || (resp.StatusCode == http.StatusOK && !strings.Contains(string(body), `"user":"bob"`)) {
				t.Fatalf("reached the wrong environment: %s", body)
			}
		})
	}

	t.Run("another user's WebSocket", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		u, _ := url.Parse(f.gateway.URL)
		header := http.Header{"Cookie": {cookieHeader(bob, u)}}
		_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.gateway.URL, "http")+alice+"ws", &websocket.DialOptions{HTTPHeader: header})
		if err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("WebSocket to alice's environment as bob: %v %v", resp, err)
		}
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.gateway.URL, "http")+"/u/"+f.ns+"/bob/ws", &websocket.DialOptions{HTTPHeader: header})
		if err != nil {
			t.Fatalf("own WebSocket: %v", err)
		}
		defer func() { _ = c.CloseNow() }()
		_, msg, err := c.Read(ctx)
		if err != nil || string(msg) != "hello bob" {
			t.Fatalf("own WebSocket said %q (%v)", msg, err)
		}
	})

	t.Run("forged cookie", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, f.gateway.URL+alice, nil)
		req.Header.Set("Cookie", session.CookieName+"=forged")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("forged cookie: %s, want 401", resp.Status)
		}
	})

	t.Run("admins reach everyone", func(t *testing.T) {
		root := browser(t)
		signIn(t, root, f.gateway.URL, "root", "root-pw")
		resp, body := get(t, root, f.gateway.URL+alice, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"user":"root"`) {
			t.Fatalf("admin: %s %s", resp.Status, body)
		}
	})

	t.Run("login cannot redirect off-site", func(t *testing.T) {
		c := browser(t)
		resp, err := c.PostForm(f.gateway.URL+"/login", url.Values{"username": {"bob"}, "password": {"bob-pw"}, "rd": {"//evil.example/"}})
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if loc := resp.Header.Get("Location"); loc != "/" {
			t.Fatalf("redirected to %q", loc)
		}
	})
}

func cookieHeader(c *http.Client, u *url.URL) string {
	var parts []string
	for _, ck := range c.Jar.Cookies(u) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	return strings.Join(parts, "; ")
}

// stopAliceAsIdle moves the controller's clock past alice's idle timeout,
// pokes her Userland so the controller looks, and waits for the stop.
func stopAliceAsIdle(t *testing.T, f fixture, poke string) v1alpha1.Userland {
	t.Helper()
	clock.SetTime(clock.Now().Add(6 * time.Minute))
	var ul v1alpha1.Userland
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "alice"}, &ul); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ul.DeepCopy())
	ul.Annotations = map[string]string{"test/poke": poke}
	if err := env.Client.Patch(context.Background(), &ul, patch); err != nil {
		t.Fatal(err)
	}
	f.waitPhase(t, "alice", v1alpha1.PhaseStopped)
	return ul
}

// waitPhase waits until the Userland reports phase, in the API server and
// then in the gateway's cache. The gateway decides from its cache, which
// follows the API server a moment later: a request before it sees a stop
// is proxied as to a running environment, and wakes nothing.
func (f fixture) waitPhase(t *testing.T, name string, phase v1alpha1.Phase) {
	t.Helper()
	env.WaitPhase(t, f.ns, name, phase)
	env.Eventually(t, 10*time.Second, fmt.Sprintf("the gateway's cache sees %s %s", name, phase), func(ctx context.Context) (bool, error) {
		var cached v1alpha1.Userland
		err := f.server.Reader.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &cached)
		return err == nil && cached.Status.Phase == phase, err
	})
}

func TestStoppedEnvironmentIsWokenByARequest(t *testing.T) {
	// The controller runs on a fake clock; the gateway records activity on
	// the same one, a second later than it reads.
	f := setup(t, func(s *gateway.Server) {
		s.Activity.Now = func() time.Time { return clock.Now().Add(time.Second) }
	})
	alice := browser(t)
	signIn(t, alice, f.gateway.URL, "alice", "alice-pw")

	// Idle: the controller's clock moves past the timeout.
	stopAliceAsIdle(t, f, "1")

	// A page load is held while the environment starts, and here the
	// start is quicker than the hold: the page is the environment itself,
	// with no progress page and no reload to wait for.
	start := time.Now()
	resp, body := get(t, alice, f.gateway.URL+"/u/"+f.ns+"/alice/", map[string]string{"Sec-Fetch-Mode": "navigate"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"user":"alice"`) {
		t.Fatalf("navigation to a stopped environment that starts within the hold: %s %s", resp.Status, body)
	}
	t.Logf("page load held %s while the environment woke", time.Since(start).Round(time.Millisecond))
	if n := f.metric(t, "userland_gateway_wakes_total", nil); n != 1 {
		t.Errorf("wakes counted %v, want 1", n)
	}

	// Idle again soon after: the next request wakes it again rather than
	// waiting on the wake before, which has finished.
	stopAliceAsIdle(t, f, "2")
	// An XHR is held until Ready.
	start = time.Now()
	resp, body = get(t, alice, f.gateway.URL+"/u/"+f.ns+"/alice/api", map[string]string{"Accept": "application/json"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"user":"alice"`) {
		t.Fatalf("held request after the second stop: %s %s", resp.Status, body)
	}
	t.Logf("request held %s while the environment woke", time.Since(start).Round(time.Millisecond))
	if n := f.metric(t, "userland_gateway_wakes_total", nil); n != 2 {
		t.Errorf("wakes counted %v, want 2", n)
	}
}

// TestSlowStartShowsTheProgressPage: a start that outlasts the page load's
// hold gets the progress page, which says why the environment was stopped
// and reloads itself; the reload, held again, is the environment.
func TestSlowStartShowsTheProgressPage(t *testing.T) {
	// A hold far shorter than any start, so every page load outlasts it.
	f := setup(t, func(s *gateway.Server) {
		s.Activity.Now = func() time.Time { return clock.Now().Add(time.Second) }
		s.NavigationHold = time.Millisecond
	})
	alice := browser(t)
	signIn(t, alice, f.gateway.URL, "alice", "alice-pw")
	ul := stopAliceAsIdle(t, f, "1")

	resp, body := get(t, alice, f.gateway.URL+"/u/"+f.ns+"/alice/", map[string]string{"Sec-Fetch-Mode": "navigate"})
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(body, "<h1>Starting "+ul.Status.DisplayName+"…</h1>") ||
		!strings.Contains(body, "stopped because nobody had used it") || !strings.Contains(body, `http-equiv="refresh" content="1"`) {
		t.Fatalf("navigation to a stopped environment: %s %s", resp.Status, body)
	}
	// The browser reloads until the environment answers.
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
		resp, body = get(t, alice, f.gateway.URL+"/u/"+f.ns+"/alice/", map[string]string{"Sec-Fetch-Mode": "navigate"})
		return resp.StatusCode == http.StatusOK && strings.Contains(body, `"user":"alice"`), nil
	})
	if err != nil {
		t.Fatalf("the reloads never reached the environment: %s %s", resp.Status, body)
	}
}

func TestTrustedHeaderOnlyFromTrustedSources(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cidr string
		want int
	}{
		"trusted proxy":    {"127.0.0.0/8", http.StatusOK},
		"untrusted source": {"10.0.0.0/8", http.StatusUnauthorized},
	} {
		t.Run(name, func(t *testing.T) {
			f := setup(t, func(s *gateway.Server) {
				s.Header = &auth.TrustedHeader{UserHeader: "X-Auth-User", EmailHeader: "X-Auth-Email", GroupsHeader: "X-Auth-Groups",
					Trusted: []netip.Prefix{netip.MustParsePrefix(tc.cidr)}}
				s.Proxy = proxy.New([]string{"X-Auth-User", "X-Auth-Email", "X-Auth-Groups"})
			})
			resp, body := get(t, http.DefaultClient, f.gateway.URL+"/u/"+f.ns+"/alice/", map[string]string{"X-Auth-User": "alice"})
			if resp.StatusCode != tc.want {
				t.Fatalf("%s %s, want %d", resp.Status, body, tc.want)
			}
			if tc.want == http.StatusOK && !strings.Contains(body, `"user":"alice"`) {
				t.Fatalf("upstream saw %s", body)
			}
		})
	}
}

// TestSignInAutoProvisionsOncePerTemplate: oliver and his domain are in
// no other test's courses or templates, so his sign-ins reach only this
// test's namespace.
func TestSignInAutoProvisionsOncePerTemplate(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	lab := testobj.MakeTemplate(f.ns, "lab").Container("web").AutoProvision("once.example.ac.jp").Obj()
	if err := env.Client.Create(ctx, lab); err != nil {
		t.Fatal(err)
	}
	// The gateway reads templates from its cache.
	f.waitCached(t, lab)

	signIn(t, browser(t), f.gateway.URL, "oliver", "oliver-pw")
	// Concurrent sign-ins, as from several replicas, create nothing more.
	done := make(chan error, 5)
	for range 5 {
		go func() {
			_, err := f.server.Provisioner.Provision(ctx, session.Identity{User: "oliver", Email: "oliver@once.example.ac.jp"})
			done <- err
		}()
	}
	for range 5 {
		if err := <-done; err != nil {
			t.Errorf("concurrent provisioning: %v", err)
		}
	}
	// bob's e-mail is not in the domain: nothing for him.
	signIn(t, browser(t), f.gateway.URL, "bob", "bob-pw")

	var list v1alpha1.UserlandList
	if err := env.Client.List(ctx, &list, client.InNamespace(f.ns), client.MatchingLabels{"userland.dev/auto-provisioned": "true"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d auto-provisioned Userlands, want exactly one", len(list.Items))
	}
	ul := list.Items[0]
	if ul.Spec.User != "oliver" || ul.Spec.TemplateRef.Name != "lab" || ul.Name != "oliver-lab" {
		t.Errorf("provisioned %s for %q from %s", ul.Name, ul.Spec.User, ul.Spec.TemplateRef.Name)
	}
}

// TestAutoProvisionedIsReadableAtOnce: a sign-in goes straight on to the
// environment it made (the hand-off, the dashboard), which read the
// gateway's cache, so the cache must show it when provisioning returns,
// not a moment later (make bench's class start met "not found" there).
func TestAutoProvisionedIsReadableAtOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	// A domain of its own: templates of other tests, in namespaces being
	// deleted, must not admit these students.
	lab := testobj.MakeTemplate(f.ns, "lab").Container("web").AutoProvision("readable.example.ac.jp").Obj()
	if err := env.Client.Create(ctx, lab); err != nil {
		t.Fatal(err)
	}
	f.waitCached(t, lab)
	for i := range 20 {
		user := fmt.Sprintf("student%d", i)
		n, err := f.server.Provisioner.Provision(ctx, session.Identity{User: user, Email: user + "@readable.example.ac.jp"})
		if err != nil || n != 1 {
			t.Fatalf("provisioning %s: %d created, %v", user, n, err)
		}
		if err := f.server.Reader.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: user + "-lab"}, &v1alpha1.Userland{}); err != nil {
			t.Fatalf("the cache lacks %s's environment when provisioning returns: %v", user, err)
		}
	}
}

// TestLogoutNeedsThePostAndItsToken: another site can make a signed-in
// browser GET /logout (a link, an <img>) or POST to it (a form); neither
// may sign the user out. Only the gateway's own form, carrying the
// session's token, does.
func TestLogoutNeedsThePostAndItsToken(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := browser(t)
	signIn(t, c, f.gateway.URL, "alice", "alice-pw")
	signedIn := func(when string) {
		t.Helper()
		if resp, _ := get(t, c, f.gateway.URL+"/u/"+f.ns+"/alice/", nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s, want still signed in", when, resp.Status)
		}
	}
	signedIn("before logout")

	// An <img src=/logout> on any page: the sign-out page, not a sign-out.
	resp, body := get(t, c, f.gateway.URL+"/logout", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `action="/logout"`) || !strings.Contains(body, `name="csrf"`) {
		t.Fatalf("GET /logout: %s, want the sign-out form\n%s", resp.Status, body)
	}
	token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if token == nil {
		t.Fatalf("no token in the sign-out form:\n%s", body)
	}
	signedIn("after GET /logout")

	logout := func(form url.Values, header map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, f.gateway.URL+"/logout", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	// Another site's form: refused by Fetch Metadata, token or not.
	if resp := logout(url.Values{"csrf": {token[1]}}, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site POST /logout: %s, want 403", resp.Status)
	}
	// A client without Fetch Metadata and without the token.
	if resp := logout(url.Values{}, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST /logout without the token: %s, want 403", resp.Status)
	}
	if resp := logout(url.Values{"csrf": {"forged"}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST /logout with a forged token: %s, want 403", resp.Status)
	}
	signedIn("after refused sign-outs")

	// The page's own form.
	if resp := logout(url.Values{"csrf": {token[1]}}, map[string]string{"Sec-Fetch-Site": "same-origin"}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /logout with the token: %s, want 303", resp.Status)
	}
	if resp, _ := get(t, c, f.gateway.URL+"/u/"+f.ns+"/alice/", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after logout: %s, want 401", resp.Status)
	}
	// The dashboard's sign-out button is the same form.
	signIn(t, c, f.gateway.URL, "alice", "alice-pw")
	if _, home := get(t, c, f.gateway.URL+"/", nil); !strings.Contains(home, `<form method="post" action="/logout"`) || strings.Contains(home, `href="/logout"`) {
		t.Errorf("the dashboard does not sign out with a POST form:\n%s", home)
	}
}

func TestSuspendedEnvironmentIsNotWoken(t *testing.T) {
	t.Parallel()
	f := setup(t, func(s *gateway.Server) { s.WakeTimeout = time.Second })
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var ul v1alpha1.Userland
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "alice"}, &ul); err != nil {
			return err
		}
		ul.Spec.Suspend = true
		return env.Client.Update(ctx, &ul)
	})
	if err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, f.ns, "alice", v1alpha1.PhaseStopped)
	c := browser(t)
	signIn(t, c, f.gateway.URL, "alice", "alice-pw")
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		resp, body := get(t, c, f.gateway.URL+"/u/"+f.ns+"/alice/", map[string]string{"Sec-Fetch-Mode": "navigate"})
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(body, "suspended"), nil
	})
	if err != nil {
		t.Fatal("the suspended page never appeared")
	}
	if n := f.metric(t, "userland_gateway_wakes_total", nil); n != 0 {
		t.Errorf("a suspended environment was woken (%v wakes)", n)
	}
}

func TestFailedEnvironmentExplainsAndHeldRequestsTimeOut(t *testing.T) {
	t.Parallel()
	f := setup(t, func(s *gateway.Server) { s.WakeTimeout = time.Second })
	ctx := context.Background()
	failPod(t, f.ns, "alice", corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "pull access denied"})
	env.WaitPhase(t, f.ns, "alice", v1alpha1.PhaseFailed)

	c := browser(t)
	signIn(t, c, f.gateway.URL, "alice", "alice-pw")
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, body := get(t, c, f.gateway.URL+"/u/"+f.ns+"/alice/", map[string]string{"Sec-Fetch-Mode": "navigate"})
		return strings.Contains(body, "the image could not be pulled") && strings.Contains(body, "cannot start"), nil
	})
	if err != nil {
		t.Fatal("the progress page never explained the failure")
	}
	start := time.Now()
	resp, _ := get(t, c, f.gateway.URL+"/u/"+f.ns+"/alice/api", map[string]string{"Accept": "application/json"})
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("held request: %s Retry-After=%q, want 503 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	if held := time.Since(start); held < time.Second {
		t.Errorf("request answered after %s, before the 1s wake timeout", held)
	}
}
