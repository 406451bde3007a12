//go:build faults

package faults

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

func replicaOf(t *testing.T, name string, keys ...string) *testenv.Backend {
	t.Helper()
	base, stop := startReplica(t, keys)
	target, _ := url.Parse(base)
	return &testenv.Backend{Name: name, Handler: httputil.NewSingleHostReverseProxy(target), Stop: stop}
}

// TestThreeGatewayReplicas runs three gateways sharing session keys behind
// one address with no stickiness. A user's plain requests, WebSockets and
// the wake of an environment stopped for idleness cross replicas; a key
// rotation done replica by replica (new key added, then moved first)
// signs nobody out; removing the old key afterwards signs out only the
// sessions signed with it.
func TestThreeGatewayReplicas(t *testing.T) {
	releaseLease(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	for _, o := range []client.Object{
		testobj.MakeTemplate(ns, "lab").Container("app").Idle(time.Minute).Obj(),
		testobj.MakeUserland(ns, "alice-lab", "alice", "lab").Obj(),
		testobj.MakeUserland(ns, "carol-lab", "carol", "lab").Obj(),
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	startController(t, "controller")
	waitReady(t, ns, 2, 2*time.Minute)

	k1, k2 := newKey(), newKey()
	lb := &testenv.RoundRobin{}
	front := httptest.NewServer(lb)
	t.Cleanup(front.Close)
	rs := []*testenv.Backend{replicaOf(t, "a", k1), replicaOf(t, "b", k1), replicaOf(t, "c", k1)}
	lb.Set(rs...)
	envURL := func(name string) string { return front.URL + "/u/" + ns + "/" + name + "/" }
	crossed := func(what string) {
		t.Helper()
		for _, r := range lb.Backends() {
			if r.Served.Load() == 0 {
				t.Errorf("%s: replica %s served nothing; the test did not cross replicas", what, r.Name)
			}
			r.Served.Store(0)
		}
	}
	signedIn := func(c *http.Client, name string) bool {
		code, body, err := fetch(c, envURL(name))
		return err == nil && code == http.StatusOK && strings.Contains(body, "alice")
	}

	// Plain requests and WebSockets, each replica in turn.
	alice, aliceUntouched := browser(), browser()
	for _, c := range []*http.Client{alice, aliceUntouched} {
		if resp, err := signIn(c, front.URL, "alice"); err != nil || resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("alice's sign-in: %v %v", resp, err)
		}
	}
	for i := range 6 {
		if !signedIn(alice, "alice-lab") {
			t.Fatalf("alice's request %d through the pool was not served", i)
		}
	}
	crossed("plain requests")
	u, _ := url.Parse(front.URL)
	cookie := ""
	for _, ck := range alice.Jar.Cookies(u) {
		cookie += ck.Name + "=" + ck.Value + "; "
	}
	wsURL := "ws" + strings.TrimPrefix(envURL("alice-lab"), "http") + "ws"
	for i := range 3 {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, _, err := websocket.Dial(wctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {cookie}, "Origin": {front.URL}}})
		if err != nil {
			cancel()
			t.Fatalf("WebSocket %d through the pool: %v", i, err)
		}
		_, hello, err := c.Read(wctx)
		if err != nil || !strings.Contains(string(hello), "alice") {
			t.Errorf("WebSocket %d greeting %q, %v", i, hello, err)
		}
		_ = c.Close(websocket.StatusNormalClosure, "")
		cancel()
	}
	crossed("WebSockets")

	// A wake crosses replicas: carol's untouched environment stops for
	// idleness; her navigation wakes it on one replica, and the app's
	// requests, spread over all three, are held until it is Ready.
	carol := browser()
	if resp, err := signIn(carol, front.URL, "carol"); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("carol's sign-in: %v %v", resp, err)
	}
	var ul v1alpha1.Userland
	// Polled often, so the wake below usually lands in the very second of
	// the stop: both are stored in whole seconds, and such a wake was once
	// ignored.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "carol-lab"}, &ul)
		return err == nil && ul.Status.Phase == v1alpha1.PhaseStopped && ul.Status.StoppedReason == v1alpha1.StoppedIdle, nil
	})
	if err != nil {
		t.Fatalf("carol's environment never stopped for idleness: %s %s", ul.Status.Phase, ul.Status.StoppedReason)
	}
	for _, r := range lb.Backends() {
		r.Served.Store(0)
	}
	wakeStart := time.Now()
	req, _ := http.NewRequest(http.MethodGet, envURL("carol-lab"), nil)
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	resp, err := carol.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	// The page load is held up to 2 s: the environment itself if it
	// started by then, else the progress page.
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted:
		t.Logf("carol's navigation to her stopped environment: %s after %s", resp.Status, time.Since(wakeStart).Round(time.Millisecond))
	default:
		t.Errorf("carol's navigation to her stopped environment: %s, want the environment or the progress page", resp.Status)
	}
	var held sync.WaitGroup
	codes := make([]int, 3)
	for i := range codes {
		held.Add(1)
		go func() {
			defer held.Done()
			req, _ := http.NewRequest(http.MethodGet, envURL("carol-lab")+"api", nil)
			req.Header.Set("Accept", "application/json")
			c := &http.Client{Jar: carol.Jar, Timeout: 3 * time.Minute}
			if resp, err := c.Do(req); err == nil {
				codes[i] = resp.StatusCode
				_ = resp.Body.Close()
			}
		}()
	}
	held.Wait()
	t.Logf("carol's environment woken across replicas: held requests answered %v after %s", codes, time.Since(wakeStart).Round(time.Millisecond))
	for i, code := range codes {
		if code != http.StatusOK {
			t.Errorf("held request %d answered %d, want 200 once the environment is Ready", i, code)
		}
	}
	crossed("the wake")

	// Rotation, replica by replica as a rolling update does it: the new key
	// is added second everywhere, then moved first.
	roll := func(check bool, keys ...string) {
		t.Helper()
		for i, old := range rs {
			next := replicaOf(t, old.Name, keys...)
			rs[i] = next
			lb.Set(rs...)
			old.Stop()
			if check && !signedIn(alice, "alice-lab") {
				t.Fatalf("alice was signed out while replica %s moved to %d key(s)", old.Name, len(keys))
			}
		}
	}
	// A WebSocket on each replica: replacing the replica closes it with
	// 1001 "going away", which the app sees and reconnects on, rather
	// than a dropped connection.
	var open []*websocket.Conn
	for i := range 3 {
		c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {cookie}, "Origin": {front.URL}}})
		if err != nil {
			t.Fatalf("WebSocket %d before the roll-out: %v", i, err)
		}
		if _, _, err := c.Read(ctx); err != nil {
			t.Fatalf("WebSocket %d greeting: %v", i, err)
		}
		open = append(open, c)
	}
	roll(true, k1, k2)
	for i, c := range open {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, _, err := c.Read(rctx)
		cancel()
		if got := websocket.CloseStatus(err); got != websocket.StatusGoingAway {
			t.Errorf("WebSocket %d when its replica was replaced: %v (status %d), want a close frame with 1001 going away", i, err, got)
		}
		_ = c.CloseNow()
	}
	roll(true, k2, k1)
	for i := range 6 {
		if !signedIn(alice, "alice-lab") {
			t.Fatalf("alice's request %d after the rotation: signed out", i)
		}
	}
	dave := browser()
	if resp, err := signIn(dave, front.URL, "dave"); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("dave's sign-in after the rotation: %v %v", resp, err)
	}

	// Removing K1 (docs/operations.md says: one session TTL later) signs out what
	// K1 signed — both of alice's sessions, from before the rotation — and
	// nothing else: dave's, signed with K2, stays.
	roll(false, k2)
	for i := range 3 {
		code, _, err := fetch(aliceUntouched, envURL("alice-lab"))
		if err != nil || code == http.StatusOK {
			t.Errorf("the K1 session after K1 was removed, request %d: %d %v; want it signed out", i, code, err)
		}
		if code, _, err := fetch(dave, front.URL+"/"); err != nil || code != http.StatusOK {
			t.Errorf("dave's K2 session after K1 was removed, request %d: %d %v; want it kept", i, code, err)
		}
	}
	if signedIn(alice, "alice-lab") {
		t.Error("alice's K1 session still works after K1 was removed")
	}
	t.Logf("after removing K1: the K1 sessions are signed out, the K2 session is kept")
}
