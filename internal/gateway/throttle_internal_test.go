package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Made-up user names cannot grow the sign-in throttle without bound, and
// however long a name is posted, its entry is small.
func TestThrottleMemoryIsBounded(t *testing.T) {
	th := newThrottle(accountEvery, accountBurst)
	now := time.Now()
	for i := range 3 * throttleKeys {
		name := fmt.Sprintf("hostile-%d-%s", i, strings.Repeat("x", i%200))
		if refund, _ := th.take(accountKey(name), now); refund == nil {
			t.Fatalf("a fresh name %d was throttled", i)
		}
	}
	if n := th.limiters.Len(); n > throttleKeys {
		t.Fatalf("%d limiters kept, want at most %d", n, throttleKeys)
	}
	if k := accountKey(strings.Repeat("a", 64<<10)); len(k) > 64 {
		t.Errorf("a 64 KiB name is kept under a %d-byte key", len(k))
	}
}

func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for name, tc := range map[string]struct {
		remote string
		xff    []string
		want   string
	}{
		"direct":                      {"192.0.2.7:5000", nil, "192.0.2.7"},
		"direct, forged header":       {"192.0.2.7:5000", []string{"198.51.100.1"}, "192.0.2.7"},
		"through the ingress":         {"10.1.2.3:5000", []string{"198.51.100.1"}, "198.51.100.1"},
		"client-written entries left": {"10.1.2.3:5000", []string{"1.1.1.1, 2.2.2.2, 198.51.100.1"}, "198.51.100.1"},
		"two trusted hops":            {"10.1.2.3:5000", []string{"198.51.100.1", "10.9.9.9"}, "198.51.100.1"},
		"garbage from the client":     {"10.1.2.3:5000", []string{"nonsense, 198.51.100.1"}, "198.51.100.1"},
		"ingress without the header":  {"10.1.2.3:5000", nil, "10.1.2.3"},
		"IPv4-mapped IPv6":            {"[::ffff:192.0.2.7]:5000", nil, "192.0.2.7"},
		"IPv6 is its /64":             {"[2001:db8:1:2:aaaa::7]:5000", nil, "2001:db8:1:2::/64"},
	} {
		t.Run(name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tc.remote, Header: http.Header{}}
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if diff := cmp.Diff(tc.want, clientAddr(r, trusted)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// A refunded attempt (a successful sign-in) costs nothing; failures do.
func TestThrottleRefund(t *testing.T) {
	t.Parallel()
	th := newThrottle(accountEvery, accountBurst)
	now := time.Now()
	for i := range 3 * accountBurst {
		refund, wait := th.take("alice", now.Add(time.Duration(i)*time.Millisecond))
		if refund == nil {
			t.Fatalf("sign-in %d throttled (wait %s) though every earlier one was refunded", i, wait)
		}
		refund()
	}
	for i := range accountBurst {
		if refund, _ := th.take("alice", now.Add(time.Second)); refund == nil {
			t.Fatalf("failure %d throttled within the burst", i)
		}
	}
	refund, wait := th.take("alice", now.Add(time.Second))
	if refund != nil || wait <= 0 || wait > accountEvery {
		t.Errorf("past the burst: refund %v, wait %s; want a wait of at most %s", refund != nil, wait, accountEvery)
	}
}

// TestFormErrorsAreTheGatewaysPages: a form the gateway cannot read is
// answered with the gateway's own page in a browser, and as plain text
// to a script, with the status that says why.
func TestFormErrorsAreTheGatewaysPages(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err    error
		accept string
		code   int
		ctype  string
	}{
		"too large, a browser": {&http.MaxBytesError{Limit: 1}, "text/html", http.StatusRequestEntityTooLarge, "text/html; charset=utf-8"},
		"too large, a script":  {&http.MaxBytesError{Limit: 1}, "*/*", http.StatusRequestEntityTooLarge, "text/plain; charset=utf-8"},
		"malformed, a browser": {errors.New("invalid semicolon separator"), "text/html", http.StatusBadRequest, "text/html; charset=utf-8"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodPost, "/login", nil)
			r.Header.Set("Accept", tc.accept)
			w := httptest.NewRecorder()
			formError(w, r, tc.err)
			if w.Code != tc.code || w.Header().Get("Content-Type") != tc.ctype {
				t.Errorf("%d %q, want %d %q", w.Code, w.Header().Get("Content-Type"), tc.code, tc.ctype)
			}
		})
	}
}
