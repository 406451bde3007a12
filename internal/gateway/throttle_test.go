package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/userland-dev/userland/internal/gateway"
)

// from is a browser whose connections leave from local address ip (any
// 127.0.0.0/8 address is this machine), so the gateway sees another client.
func from(t *testing.T, ip string) *http.Client {
	jar, _ := cookiejar.New(nil)
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 64}}
}

func postLogin(t *testing.T, c *http.Client, gw string, form url.Values) *http.Response {
	t.Helper()
	resp, err := c.PostForm(gw+"/login", form)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp
}

// TestSignInFloodsAreThrottledPerAccountAndClient: an attacker guessing
// alice's password from many connections at once gets 429 with
// Retry-After after a few tries, costing no more password checks; bob,
// from another address, signs in meanwhile as fast as ever, although one
// password check runs at a time. A client failing against many accounts
// is throttled as a client.
//
// The gateway's clock stands still here: no bucket refills during the
// test, so what it counts does not depend on how fast this machine checks
// passwords (under the race detector on a busy machine, a refill let a
// throttled client through on its next request).
func TestSignInFloodsAreThrottledPerAccountAndClient(t *testing.T) {
	frozen := testingclock.NewFakePassiveClock(time.Now())
	f := setup(t, func(s *gateway.Server) {
		s.Limits.PasswordChecks = 1
		s.Clock = frozen
	})
	ctx, stop := context.WithCancel(context.Background())
	var codes sync.Map // status code → *atomic.Int32
	var retryAfter atomic.Value
	var flood sync.WaitGroup
	attacker := from(t, "127.0.0.1")
	for range 32 {
		flood.Go(func() {
			for ctx.Err() == nil {
				resp, err := attacker.PostForm(f.gateway.URL+"/login", url.Values{"username": {"alice"}, "password": {"guess"}})
				if err != nil {
					continue
				}
				_ = resp.Body.Close()
				n, _ := codes.LoadOrStore(resp.StatusCode, new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
				if resp.StatusCode == http.StatusTooManyRequests {
					retryAfter.Store(resp.Header.Get("Retry-After"))
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond) // the flood is on

	bob := from(t, "127.0.0.2")
	const bound = 2 * time.Second
	for i := range 3 {
		start := time.Now()
		resp := postLogin(t, bob, f.gateway.URL, url.Values{"username": {"bob"}, "password": {"bob-pw"}, "rd": {"/"}})
		took := time.Since(start)
		t.Logf("bob's sign-in %d during the flood: %s in %s", i, resp.Status, took.Round(time.Millisecond))
		if resp.StatusCode != http.StatusSeeOther || took > bound {
			t.Errorf("bob's sign-in during a flood against alice: %s in %s, want 303 within %s", resp.Status, took, bound)
		}
	}
	// Even her right password waits until the account's next attempt:
	// the price of an account nobody can guess at speed.
	if resp := postLogin(t, from(t, "127.0.0.4"), f.gateway.URL, url.Values{"username": {"alice"}, "password": {"alice-pw"}}); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("alice's own sign-in during the flood: %s, want 429", resp.Status)
	}
	stop()
	flood.Wait()

	count := func(code int) int32 {
		if n, ok := codes.Load(code); ok {
			return n.(*atomic.Int32).Load()
		}
		return 0
	}
	t.Logf("flood against alice: %d checked (401), %d throttled (429), Retry-After %v",
		count(http.StatusUnauthorized), count(http.StatusTooManyRequests), retryAfter.Load())
	if checked := count(http.StatusUnauthorized); checked != 5 {
		t.Errorf("%d of the flood's guesses were checked, want the account's burst (5)", checked)
	}
	if count(http.StatusTooManyRequests) == 0 {
		t.Fatal("the flood was never throttled")
	}
	if ra, _ := retryAfter.Load().(string); ra == "" {
		t.Error("429 without Retry-After")
	} else if n, err := strconv.Atoi(ra); err != nil || n < 1 || n > 60 {
		t.Errorf("Retry-After %q, want whole seconds within a minute", ra)
	}
	if got := f.metric(t, "userland_gateway_signin_failures_total", map[string]string{"reason": "throttled"}); got == 0 {
		t.Error("throttled sign-ins are not counted")
	}

	// One client guessing across made-up accounts: each account is fresh,
	// but the client runs out.
	sprayer := from(t, "127.0.0.3")
	var throttled *http.Response
	failures := 0
	for i := range 100 {
		resp := postLogin(t, sprayer, f.gateway.URL, url.Values{"username": {fmt.Sprintf("user%03d", i)}, "password": {"guess"}})
		if resp.StatusCode == http.StatusTooManyRequests {
			throttled = resp
			t.Logf("the sprayer was throttled after %d failures", i)
			break
		}
		failures++
	}
	if throttled == nil || throttled.Header.Get("Retry-After") == "" {
		t.Fatal("100 failures from one client across accounts were never throttled")
	}
	if failures != 30 {
		t.Errorf("the sprayer was throttled after %d failures, want the client's burst (30)", failures)
	}
	// That client's right password for bob waits too; bob elsewhere not.
	if resp := postLogin(t, sprayer, f.gateway.URL, url.Values{"username": {"bob"}, "password": {"bob-pw"}}); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a throttled client's sign-in: %s, want 429", resp.Status)
	}
	if resp := postLogin(t, bob, f.gateway.URL, url.Values{"username": {"bob"}, "password": {"bob-pw"}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("bob from his own address: %s, want 303", resp.Status)
	}
	// Successful sign-ins cost nothing: bob signs in again and again.
	for i := range 10 {
		if resp := postLogin(t, bob, f.gateway.URL, url.Values{"username": {"bob"}, "password": {"bob-pw"}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("bob's sign-in %d in a row: %s, want 303", i, resp.Status)
		}
	}
}
