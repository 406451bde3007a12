//go:build realnode

package realnode_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/devcontroller"
	"github.com/userland-dev/userland/internal/devenv"
	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestDevOnRealNode is `userland dev --real-node`: the dev stack (its
// controller and webhooks, and its gateway on this machine) with the pods
// on a real node. A student signs in and opens her environment on its own
// origin; the gateway reaches the real pod by its Service's cluster DNS
// name, resolved by CoreDNS from inside the node. The environment's claim
// is bound by dev mode's binder, since the node has no provisioner. Another student asking
// for her environment gets nothing of it. Stopping the stack leaves
// nothing of the node behind.
func TestDevOnRealNode(t *testing.T) {
	opts := nodeOptions(t)
	listen, err := simcluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	stack, err := devenv.Start(ctx, devenv.Options{
		StateDir: t.TempDir(), Listen: listen, Log: testWriter{t}, ControlPlaneDir: opts.ControlPlaneDir,
		NewController: devcontroller.New,
		RealNode:      &devenv.RealNodeOptions{NodeBinariesDir: opts.NodeBinariesDir, Images: opts.Images},
	})
	if err != nil {
		t.Fatalf("userland dev --real-node: %v", err)
	}
	t.Logf("TIMING dev stack on a real node up in %s", time.Since(start).Round(10*time.Millisecond))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = stack.Stop()
		}
	})
	if stack.Simulated || stack.DemoApps() != nil {
		t.Fatal("the stack on a real node says it runs simulated pods")
	}
	if banner := stack.Banner(); !strings.Contains(banner, "real node") {
		t.Errorf("the banner does not say the pods run on a real node:\n%s", banner)
	}

	c := stack.Client
	// A claim, as every sample has: the node has no provisioner, so dev
	// mode's binder must give it a local volume for the pod to start.
	tmpl := testobj.MakeTemplate(devenv.DemoNamespace, "probe").Image(probeImage).Volume("data", "/data").Obj()
	tmpl.Spec.PodTemplate.Spec.Containers[0].ReadinessProbe = readiness()
	if err := c.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	ul := testobj.MakeUserland(devenv.DemoNamespace, "alice-probe", "alice", "probe").Obj()
	if err := c.Create(ctx, ul); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	var envURL string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ul.Namespace, Name: ul.Name}, ul); err != nil {
			return false, nil
		}
		envURL = ul.Status.URL
		return meta.IsStatusConditionTrue(ul.Status.Conditions, v1alpha1.ConditionReady) && envURL != "", nil
	})
	if err != nil {
		t.Fatalf("alice's environment was not Ready with a URL within 5 minutes on the real node: %+v", ul.Status)
	}
	t.Logf("TIMING alice's real pod Ready (status) %s after her Userland was created; URL %s", time.Since(created).Round(10*time.Millisecond), envURL)

	alice := gatewayClient(t, listen)
	signInAs(t, alice, stack.URL, "alice")
	code, body := getBody(t, alice, strings.TrimSuffix(envURL, "/")+"/")
	if code != http.StatusOK || !strings.HasPrefix(body, "hello from ") {
		t.Fatalf("alice opening her environment through the gateway: HTTP %d %q, want the probe's greeting from its real pod", code, body)
	}
	code, body = getBody(t, alice, strings.TrimSuffix(envURL, "/")+"/healthz")
	if code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Fatalf("alice's environment's /healthz: HTTP %d %q, want the real pod's 200 \"ok\"", code, body)
	}
	t.Logf("alice's environment answered through the gateway: %q", strings.TrimSpace(body))

	// bob, signed in, is refused alice's environment, and its page tells
	// him nothing from it.
	bob := gatewayClient(t, listen)
	signInAs(t, bob, stack.URL, "bob")
	code, body = getBody(t, bob, strings.TrimSuffix(envURL, "/")+"/")
	if code == http.StatusOK || strings.Contains(body, "hello from") {
		t.Fatalf("bob reached alice's environment: HTTP %d %q", code, body)
	}
	t.Logf("bob asking for alice's environment: HTTP %d", code)

	stopStart := time.Now()
	if err := stack.Stop(); err != nil {
		t.Errorf("stopping the dev stack: %v", err)
	}
	stopped = true
	t.Logf("TIMING dev stack and real node stopped and torn down in %s", time.Since(stopStart).Round(10*time.Millisecond))
	if left := realnode.Leftovers(realnode.DefaultStateDir); len(left) > 0 {
		t.Errorf("left after the dev stack stopped:\n  %s", strings.Join(left, "\n  "))
	}
}

// gatewayClient keeps cookies and sends every host (the dashboard's and
// each environment's *.localhost origin) to the gateway's address, as a
// browser resolving *.localhost to this machine does.
func gatewayClient(t *testing.T, gateway string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	return &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, gateway)
		},
	}}
}

func signInAs(t *testing.T, c *http.Client, base, user string) {
	t.Helper()
	resp, err := c.PostForm(strings.TrimSuffix(base, "/")+"/login", url.Values{"username": {user}, "password": {devenv.DemoPassword}, "rd": {"/"}})
	if err != nil {
		t.Fatalf("signing %s in: %v", user, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("signing %s in: HTTP %d after redirects", user, resp.StatusCode)
	}
}

func getBody(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A page load, as a browser's: an environment's origin without its
	// cookie yet sends it through the main host's sign-in hand-off.
	req.Header.Set("Accept", "text/html")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode, string(body)
}

// testWriter sends the dev stack's progress lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
