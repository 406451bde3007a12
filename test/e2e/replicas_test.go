package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/devenv"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testenv"
)

// TestDexSignInOnEnvironmentHostsAcrossReplicasAndKeyRotation signs in
// through Dex in Chromium on environment hosts, with two gateway replicas
// behind one address and no sticky sessions, and rotates the session keys
// the way docs/operations.md says, replica by replica, while the user works.
func TestDexSignInOnEnvironmentHostsAcrossReplicasAndKeyRotation(t *testing.T) {
	const email, password = "dana@uni.example.ac.jp", "correct horse battery"
	ctx := context.Background()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	mainURL := "http://127.0.0.1:" + port
	lb := &testenv.RoundRobin{}
	front := &http.Server{Handler: lb, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = front.Serve(l) }()
	t.Cleanup(func() { _ = front.Close() })

	dex, err := testenv.StartDex(dir, mainURL+"/oauth2/callback", []testenv.DexUser{{Email: email, Username: "dana", Password: password}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dex.Stop() })
	secretFile := filepath.Join(dir, "client-secret")
	if err := os.WriteFile(secretFile, []byte(dex.ClientSecret), 0o600); err != nil {
		t.Fatal(err)
	}

	envs := []string{"dana-a", "dana-b", "dana-c"}
	for _, name := range envs {
		ul := &v1alpha1.Userland{
			ObjectMeta: metav1.ObjectMeta{Namespace: devenv.DemoNamespace, Name: name},
			Spec:       v1alpha1.UserlandSpec{User: email, TemplateRef: v1alpha1.TemplateReference{Name: "vscode"}},
		}
		if err := stack.Client.Create(ctx, ul); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range envs {
		waitReadyInCluster(t, name)
	}

	keys := map[string]string{"K1": newKey(t), "K2": newKey(t)}
	start := func(name string, keyOrder ...string) *testenv.Backend {
		t.Helper()
		var lines []string
		for _, k := range keyOrder {
			lines = append(lines, keys[k])
		}
		keyFile := filepath.Join(dir, name+".keys")
		if err := os.WriteFile(keyFile, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		addr, err := simcluster.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		mgr, err := gateway.NewManager(stack.Config, gateway.Options{
			Listen: addr, MetricsAddr: "0", AuthMode: "oidc",
			OIDC: auth.OIDCConfig{Issuer: dex.Issuer, ClientID: dex.ClientID, RedirectURL: mainURL + "/oauth2/callback",
				Scopes: []string{"openid", "email", "profile"}, UserClaim: "email"},
			OIDCClientSecretFile: secretFile, SessionKeysFile: keyFile, SessionTTL: time.Hour, InsecureCookies: true,
			PublicURL: mainURL, BaseDomain: devenv.EnvironmentDomain,
			WakeTimeout: time.Minute, ActivityInterval: time.Minute, Resolver: stack.DemoApps(),
			Limits: gateway.Limits{WebSocketsPerUser: 64, WaitingPerUser: 32}, Registry: prometheus.NewRegistry(),
		})
		if err != nil {
			t.Fatalf("replica %s: %v", name, err)
		}
		rctx, cancel := context.WithCancel(context.Background())
		go func() { _ = mgr.Start(rctx) }()
		t.Cleanup(cancel)
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				return false, nil
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		})
		if err != nil {
			t.Fatalf("replica %s never became ready: %v", name, err)
		}
		target, _ := url.Parse("http://" + addr)
		rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// Keep the browser's Host: the gateway routes environment
			// hosts by it.
			pr.Out.Host = pr.In.Host
		}}
		return &testenv.Backend{Name: name + strings.Join(keyOrder, ","), Handler: rp, Stop: cancel}
	}
	envURL := func(name string) string {
		return "http://" + naming.HostLabel(devenv.DemoNamespace, name) + "." + devenv.EnvironmentDomain + ":" + port + "/"
	}
	browserCtx := session(t)
	openEnv := func(name string) {
		t.Helper()
		do(t, browserCtx, "opening "+name, chromedp.Navigate(envURL(name)))
		want := fmt.Sprintf("Environment %s/%s of %s", devenv.DemoNamespace, name, email)
		waitFor(t, browserCtx, name+"'s app", fmt.Sprintf(`(document.getElementById("owner")||{}).textContent === %q`, want), 30*time.Second)
	}
	phase := func(what string, rs ...*testenv.Backend) {
		t.Helper()
		for _, r := range rs {
			if r.Served.Load() == 0 {
				t.Errorf("%s: replica %s served nothing; the test did not cross replicas", what, r.Name)
			}
			t.Logf("%s: replica %s served %d requests", what, r.Name, r.Served.Load())
		}
	}

	// 1. Both replicas sign with K1. Signing in starts on an environment
	// host and goes through Dex's form.
	a, b := start("a", "K1"), start("b", "K1")
	lb.Set(a, b)
	do(t, browserCtx, "opening dana-a signed out", chromedp.Navigate(envURL("dana-a")),
		chromedp.WaitVisible(chromedp.CSS(`input[name="login"]`)))
	if u := eval[string](t, browserCtx, `location.href`); !strings.HasPrefix(u, dex.Issuer) {
		t.Fatalf("signed out, the environment host led to %s, want Dex", u)
	}
	do(t, browserCtx, "signing in at Dex",
		chromedp.SendKeys(chromedp.CSS(`input[name="login"]`), email),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), password),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)))
	waitAcrossNavigations(t, browserCtx, "dana-a's app after sign-in",
		fmt.Sprintf(`(document.getElementById("owner")||{}).textContent === %q`, "Environment demo/dana-a of "+email), 30*time.Second)
	if got := eval[string](t, browserCtx, `location.origin`); got != strings.TrimSuffix(envURL("dana-a"), "/") {
		t.Errorf("after sign-in the browser is at %s, want dana-a's own origin", got)
	}
	phase("sign-in", a, b)

	// 2. First roll-out: the new key is added second, so every replica
	// accepts it before any signs with it. Mid-way, a hand-off to a new
	// host crosses an old and a new replica.
	// A replica is replaced as a rolling update does it: the new one is
	// ready and in the pool before the old one stops.
	a2 := start("a", "K1", "K2")
	lb.Set(a2, b)
	a.Stop()
	openEnv("dana-b")
	phase("first roll-out", a2, b)

	// 3. Second roll-out: the new key moves first. Mid-way one replica
	// signs with K2 and the other with K1; each accepts both.
	a3 := start("a", "K2", "K1")
	b2 := start("b", "K1", "K2")
	lb.Set(a3, b2)
	a2.Stop()
	b.Stop()
	openEnv("dana-c")
	for _, name := range envs {
		openEnv(name) // cookies from before the roll-outs still work
	}
	phase("second roll-out, mid-way", a3, b2)
	b3 := start("b", "K2", "K1")
	lb.Set(a3, b3)
	b2.Stop()
	for _, name := range envs {
		openEnv(name)
	}
	phase("second roll-out, done", a3, b3)
}

// waitAcrossNavigations polls a predicate while the page goes through
// redirects and loads, where a single in-page poll would be cut short.
func waitAcrossNavigations(t *testing.T, ctx context.Context, what, predicate string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](predicate)); err == nil && ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitFor(t, ctx, what, predicate, time.Second)
}

func newKey(t *testing.T) string {
	b := make([]byte, 64)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func waitReadyInCluster(t *testing.T, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var ul v1alpha1.Userland
		err := stack.Client.Get(ctx, client.ObjectKey{Namespace: devenv.DemoNamespace, Name: name}, &ul)
		return err == nil && ul.Status.Phase == v1alpha1.PhaseReady, nil
	})
	if err != nil {
		t.Fatalf("%s never became Ready: %v", name, err)
	}
}
