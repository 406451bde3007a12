//go:build faults

package faults

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/echo"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testobj"
)

// echoResolver sends every environment to one echo app: kwok's pods
// serve nothing.
type echoResolver struct{ addr string }

func (e echoResolver) Resolve(context.Context, string, string, types.UID, int32) (string, error) {
	return e.addr, nil
}

// startGateway runs a gateway with static users alice, bob, carol and
// dave (password "<name>-pw") and a session key of its own in this
// process, and returns its URL.
func startGateway(t *testing.T) string {
	t.Helper()
	base, _ := startReplica(t, []string{newKey()})
	return base
}

// newKey is a session key as docs/install.md says to make one.
func newKey() string {
	key := make([]byte, 64)
	_, _ = rand.Read(key)
	return base64.StdEncoding.EncodeToString(key)
}

// echoApp is the app answering for every environment.
var echoApp struct {
	once sync.Once
	addr string
}

// startReplica runs one gateway signing with keys[0] and accepting all of
// keys, and returns its URL and a function that shuts it down gracefully.
func startReplica(t *testing.T, keys []string) (string, func()) {
	t.Helper()
	dir := t.TempDir()
	users := "users:\n"
	for _, u := range []string{"alice", "bob", "carol", "dave"} {
		hash, err := bcrypt.GenerateFromPassword([]byte(u+"-pw"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		users += fmt.Sprintf("  - name: %s\n    passwordHash: %q\n", u, hash)
	}
	usersFile, keysFile := filepath.Join(dir, "users.yaml"), filepath.Join(dir, "keys")
	if err := os.WriteFile(usersFile, []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keysFile, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	echoApp.once.Do(func() {
		app := httptest.NewServer(echo.Handler()) // lives as long as the test binary
		echoApp.addr = strings.TrimPrefix(app.URL, "http://")
	})
	addr, err := simcluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := gateway.NewManager(env.Config, gateway.Options{
		Listen: addr, MetricsAddr: "0", AuthMode: "static", StaticUsersFile: usersFile,
		SessionKeysFile: keysFile, SessionTTL: time.Hour, InsecureCookies: true,
		WakeTimeout: 2 * time.Minute, ActivityInterval: time.Second, Resolver: echoResolver{echoApp.addr},
		Limits: gateway.Limits{WebSocketsPerUser: 16, WaitingPerUser: 8}, Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = mgr.Start(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	base := "http://" + addr
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatal("the gateway never became ready")
	}
	return base, sync.OnceFunc(stop)
}

// browser keeps cookies and does not follow redirects; every request is
// bounded, so a hang is a failure, not a stuck test.
func browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func signIn(c *http.Client, base, user string) (*http.Response, error) {
	return signInWith(c, base, user, user+"-pw")
}

func fetch(c *http.Client, u string) (int, string, error) {
	resp, err := c.Get(u)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

var csrfToken = regexp.MustCompile(`name="csrf-token" content="([^"]+)"`)

// TestAPIServerDownFor30s stops kube-apiserver for 30 s under a running
// gateway and controller. Meanwhile the gateway keeps serving a Ready
// environment from its cache to an existing session, signs a static user
// in and shows the dashboard; an action that must write fails quickly
// with a message. Afterwards the activity recorded during the outage is
// written, and the controller (restarted if it exited, as the kubelet
// would) converges without duplicates.
func TestAPIServerDownFor30s(t *testing.T) {
	const outage = 30 * time.Second
	releaseLease(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	for _, o := range []client.Object{
		testobj.MakeTemplate(ns, "lab").Container("app").DisplayName("Lab").Obj(),
		testobj.MakeUserland(ns, "alice-lab", "alice", "lab").Obj(),
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	ctrlProc := startController(t, "controller")
	waitReady(t, ns, 1, 2*time.Minute)
	base := startGateway(t)
	envURL := base + "/u/" + ns + "/alice-lab/"
	alice := browser()
	if resp, err := signIn(alice, base, "alice"); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("alice's sign-in before the outage: %v %v", resp, err)
	}
	if code, _, err := fetch(alice, envURL); err != nil || code != http.StatusOK {
		t.Fatalf("alice's environment before the outage: %d %v", code, err)
	}
	_, home, _ := fetch(alice, base+"/")
	m := csrfToken.FindStringSubmatch(home)
	if m == nil {
		t.Fatal("no CSRF token on alice's dashboard")
	}

	if err := env.StopComponent("kube-apiserver", false); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	t.Logf("kube-apiserver stopped")
	// Use during the outage: it must be recorded once the API is back.
	usedAt := time.Now()
	served, failed := 0, 0
	for time.Since(down) < outage {
		code, body, err := fetch(alice, envURL)
		if err == nil && code == http.StatusOK && strings.Contains(body, "alice") {
			served++
		} else {
			failed++
			t.Errorf("alice's environment during the outage: %d %v", code, err)
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("during the outage the environment answered %d of %d requests", served, served+failed)

	bob := browser()
	if resp, err := signIn(bob, base, "bob"); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Errorf("bob's static sign-in during the outage: %v %v, want 303", resp, err)
	}
	if code, body, err := fetch(alice, base+"/"); err != nil || code != http.StatusOK || !strings.Contains(body, "Lab") {
		t.Errorf("alice's dashboard during the outage: %d %v (lists her Lab: %v)", code, err, strings.Contains(body, "Lab"))
	}
	start := time.Now()
	form := url.Values{"action": {"stop"}, "namespace": {ns}, "name": {"alice-lab"}, "csrf": {m[1]}, "rd": {"/"}}
	resp, err := alice.PostForm(base+"/dashboard/action", form)
	took := time.Since(start)
	if err != nil {
		t.Errorf("stopping during the outage: %v after %s, want a quick answer", err, took.Round(time.Millisecond))
	} else {
		_ = resp.Body.Close()
		loc := resp.Header.Get("Location")
		t.Logf("stop during the outage answered %s in %s: %s", resp.Status, took.Round(time.Millisecond), loc)
		if msg, _ := url.QueryUnescape(strings.TrimPrefix(loc, "/?error=")); !strings.Contains(msg, "could not be reached") {
			t.Errorf("stop during the outage redirected to %q, want an error saying the cluster could not be reached", loc)
		}
	}

	if err := env.StartComponent(ctx, "kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("kube-apiserver back after %s", back.Sub(down).Round(time.Millisecond))

	// The controller loses its lease when it cannot renew it (10 s); it
	// exits, and in a cluster the kubelet restarts it.
	if ctrlProc.Exited() != nil {
		t.Logf("the controller exited during the outage (lease not renewed), as designed; restarting it as the kubelet would")
		startController(t, "controller-restarted")
	}
	var ul v1alpha1.Userland
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice-lab"}, &ul); err != nil {
			return false, nil
		}
		at := ul.Status.LastActivityTime
		return at != nil && !at.Time.Before(usedAt.Truncate(time.Second)), nil
	})
	if err != nil {
		t.Errorf("the activity during the outage was never written: last activity %v, used at %v", ul.Status.LastActivityTime, usedAt)
	} else {
		t.Logf("activity from the outage written %s after the API server returned", time.Since(back).Round(time.Millisecond))
	}
	waitReady(t, ns, 1, 2*time.Minute)
	checkChildren(t, ns, 1, 0)
	if ul.Spec.Suspend {
		t.Error("the stop refused during the outage was applied later")
	}
}

// TestEtcdRestartedWithItsData restarts etcd (SIGKILL, data kept) under
// the API server, the controller and the gateway: everything reconnects,
// nothing is lost or duplicated, and new work is done.
func TestEtcdRestartedWithItsData(t *testing.T) {
	const n = 20
	releaseLease(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, testobj.MakeTemplate(ns, "lab").Container("app").Volume("work", "/work").Obj()); err != nil {
		t.Fatal(err)
	}
	ctrlProc := startController(t, "controller")
	createUserlands(t, ns, "lab", n)
	waitReady(t, ns, n, 3*time.Minute)
	base := startGateway(t)
	owner := browser()
	if resp, err := signIn(owner, base, "alice"); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %v %v", resp, err)
	}
	if err := env.Client.Create(ctx, testobj.MakeUserland(ns, "alice-lab", "alice", "lab").Obj()); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, n+1, 2*time.Minute)

	if err := env.StopComponent("etcd", true); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	time.Sleep(5 * time.Second)
	if err := env.StartComponent(ctx, "etcd"); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd killed and restarted after %s", time.Since(killed).Round(time.Millisecond))
	// The API server answers again once it reaches etcd.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var list v1alpha1.UserlandList
		return env.Client.List(ctx, &list, client.InNamespace(ns)) == nil, nil
	})
	if err != nil {
		t.Fatal("the API server never answered again after etcd's restart")
	}
	t.Logf("the API server answered %s after the kill", time.Since(killed).Round(time.Millisecond))
	if ctrlProc.Exited() != nil {
		t.Logf("the controller exited (lease not renewed); restarting it as the kubelet would")
		startController(t, "controller-restarted")
	}
	// New work after the restart is done: one more environment.
	if err := env.Client.Create(ctx, testobj.MakeUserland(ns, "bob-lab", "bob", "lab").Obj()); err != nil {
		t.Fatal(err)
	}
	took := waitReady(t, ns, n+2, 3*time.Minute)
	t.Logf("a Userland created after the restart was Ready in %s", took.Round(time.Millisecond))
	if code, _, err := fetch(owner, base+"/u/"+ns+"/alice-lab/"); err != nil || code != http.StatusOK {
		t.Errorf("alice's environment after etcd's restart: %d %v", code, err)
	}
	checkChildren(t, ns, n+2, 1)
}
