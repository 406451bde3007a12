package gateway_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/gateway/auth"
)

// A sign-in form is read within its limits before any password is
// checked, and password checks are bounded across all clients, so
// anonymous posts cannot take the cores the proxy needs.
func TestSignInFormsAreBoundedBeforeAnyPasswordCheck(t *testing.T) {
	slowHash, err := bcrypt.GenerateFromPassword([]byte("slow-pw"), 13)
	if err != nil {
		t.Fatal(err)
	}
	f := setup(t, func(s *gateway.Server) {
		s.Limits = gateway.Limits{PasswordChecks: 1, PasswordCheckWait: 100 * time.Millisecond}
		users, err := auth.NewStaticUsers([]auth.StaticUser{{Name: "slow", PasswordHash: string(slowHash)}})
		if err != nil {
			t.Fatal(err)
		}
		s.Static = users
	})
	post := func(contentType, body string) *http.Response {
		t.Helper()
		resp, err := browser(t).Post(f.gateway.URL+"/login", contentType, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}

	big := "username=slow&password=" + strings.Repeat("x", 100<<10)
	if resp := post("application/x-www-form-urlencoded", big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 100 KiB sign-in form: %s, want 413", resp.Status)
	}
	multipart := "--b\r\nContent-Disposition: form-data; name=\"username\"\r\n\r\nslow\r\n--b--\r\n"
	if resp := post("multipart/form-data; boundary=b", multipart); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a multipart sign-in form: %s, want 415", resp.Status)
	}
	if got := f.metric(t, "userland_gateway_signin_failures_total", map[string]string{"reason": "bad_form"}); got != 2 {
		t.Errorf("bad_form failures = %v, want 2", got)
	}
	if got := f.metric(t, "userland_gateway_signin_failures_total", map[string]string{"reason": "bad_credentials"}); got != 0 {
		t.Errorf("bad_credentials failures = %v, want 0: an unreadable form reached the password check", got)
	}

	// One check at a time, waiting at most 100 ms: of two wrong passwords
	// posted together against a cost-13 hash, one is checked (401) and the
	// other is turned away (429 with Retry-After).
	form := url.Values{"username": {"slow"}, "password": {"wrong"}}.Encode()
	var mu sync.Mutex
	var codes []int
	var retryAfter string
	var wg sync.WaitGroup
	start := time.Now()
	for range 2 {
		wg.Go(func() {
			resp := post("application/x-www-form-urlencoded", form)
			mu.Lock()
			defer mu.Unlock()
			codes = append(codes, resp.StatusCode)
			if resp.StatusCode == http.StatusTooManyRequests {
				retryAfter = resp.Header.Get("Retry-After")
			}
		})
	}
	wg.Wait()
	slices.Sort(codes)
	t.Logf("two concurrent checks answered %v in %s", codes, time.Since(start).Round(time.Millisecond))
	if !slices.Equal(codes, []int{http.StatusUnauthorized, http.StatusTooManyRequests}) || retryAfter == "" {
		t.Errorf("two concurrent sign-ins with one check allowed: %v (Retry-After %q), want one 401 and one 429 with Retry-After", codes, retryAfter)
	}
	// The slot is given back: a later sign-in is checked.
	if resp := post("application/x-www-form-urlencoded", url.Values{"username": {"slow"}, "password": {"slow-pw"}}.Encode()); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("sign-in after the burst: %s, want 303", resp.Status)
	}
}

// Per-user caps on held WebSockets and on requests waiting for an
// environment answer 429 with Retry-After, for that user only, and free up
// when the connections end.
func TestPerUserCapsRefuseWith429AndRetryAfter(t *testing.T) {
	f := setup(t, func(s *gateway.Server) {
		s.Limits = gateway.Limits{WebSocketsPerUser: 2, WaitingPerUser: 1}
		s.WakeTimeout = 3 * time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice, bob := browser(t), browser(t)
	signIn(t, alice, f.gateway.URL, "alice", "alice-pw")
	signIn(t, bob, f.gateway.URL, "bob", "bob-pw")
	u, _ := url.Parse(f.gateway.URL)
	wsBase := "ws" + strings.TrimPrefix(f.gateway.URL, "http") + "/u/" + f.ns
	dial := func(c *http.Client, name string) (*websocket.Conn, *http.Response, error) {
		return websocket.Dial(ctx, wsBase+"/"+name+"/ws", &websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {cookieHeader(c, u)}}})
	}

	var held []*websocket.Conn
	for i := range 2 {
		c, _, err := dial(alice, "alice")
		if err != nil {
			t.Fatalf("alice's WebSocket %d of 2: %v", i+1, err)
		}
		held = append(held, c)
	}
	_, resp, err := dial(alice, "alice")
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("alice's third WebSocket: %v %v, want 429 with Retry-After", resp, err)
	}
	if c, _, err := dial(bob, "bob"); err != nil {
		t.Errorf("bob's WebSocket while alice is at her cap: %v", err)
	} else {
		_ = c.CloseNow()
	}
	_ = held[0].CloseNow()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		c, _, err := dial(alice, "alice")
		if err != nil {
			return false, nil
		}
		held[0] = c
		return true, nil
	})
	if err != nil {
		t.Fatal("a closed WebSocket never freed its place under the cap")
	}
	for _, c := range held {
		_ = c.CloseNow()
	}

	// Alice's environment cannot start, so her requests are held; the
	// second one at once is refused.
	failPod(t, f.ns, "alice", corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"})
	env.WaitPhase(t, f.ns, "alice", v1alpha1.PhaseFailed)
	// The gateway's cache, not only the API server, must know it failed:
	// otherwise the first request is proxied rather than held.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, body := get(t, alice, f.gateway.URL+"/u/"+f.ns+"/alice/", map[string]string{"Sec-Fetch-Mode": "navigate"})
		return strings.Contains(body, "cannot start"), nil
	})
	if err != nil {
		t.Fatal("the gateway never saw alice's environment fail")
	}
	api := f.gateway.URL + "/u/" + f.ns + "/alice/api"
	first := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, api, nil)
		req.Header.Set("Accept", "application/json")
		resp, err := alice.Do(req)
		if err != nil {
			first <- nil
			return
		}
		_ = resp.Body.Close()
		first <- resp
	}()
	heldAt := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
		return f.metric(t, "userland_gateway_requests_waiting", nil) == 1, nil
	})
	if err != nil {
		t.Fatalf("the first request was not held (%v waiting)", f.metric(t, "userland_gateway_requests_waiting", nil))
	}
	t.Logf("first request held after %s", time.Since(heldAt).Round(time.Millisecond))
	start := time.Now()
	resp, _ = get(t, alice, api, map[string]string{"Accept": "application/json"})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a second request while one is held: %s (Retry-After %q), want 429 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	t.Logf("second held request refused after %s", time.Since(start).Round(time.Millisecond))
	if resp := <-first; resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("the held request: %v, want 503 after the wake timeout", resp)
	}
	if n := f.metric(t, "userland_gateway_requests_waiting", nil); n != 0 {
		t.Errorf("%v requests still counted as waiting after the wake timeout", n)
	}
}
