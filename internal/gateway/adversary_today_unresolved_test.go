package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/userland-dev/userland/internal/gateway"
)

// TestAdversaryTodayUnresolvedRevealsNothingToOthers: alice's environment
// is Ready with no ready address (the state that now answers 202 and the
// reloading progress page, or 503 to a script). Bob, signed in, asking for
// it by page load, by script or by WebSocket upgrade, must get exactly what
// a nonexistent environment gets (404), never the 202/503 "starting" that
// would tell him it exists and is running; the resolver is not even asked.
func TestAdversaryTodayUnresolvedRevealsNothingToOthers(t *testing.T) {
	t.Parallel()
	lag := &laggingResolver{}
	lag.err.Store(&gateway.ErrNoReadyEndpoint)
	f := setupWith(t, func(o *gateway.Options) {
		lag.next = o.Resolver
		o.Resolver = lag
	}, nil)
	bob := browser(t)
	signIn(t, bob, f.gateway.URL, "bob", "bob-pw")
	headers := map[string]map[string]string{
		"page load": {"Sec-Fetch-Mode": "navigate", "Accept": "text/html"},
		"script":    {"Accept": "application/json"},
		"websocket": {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="},
	}
	for how, h := range headers {
		nResp, nBody := get(t, bob, f.gateway.URL+"/u/"+f.ns+"/nobody/", h)
		before := lag.calls.Load()
		resp, body := get(t, bob, f.gateway.URL+"/u/"+f.ns+"/alice/", h)
		if resp.StatusCode != http.StatusNotFound || resp.StatusCode != nResp.StatusCode {
			t.Errorf("HOLE (%s): bob asking for alice's Ready-but-unaddressed environment got %s (a nonexistent one: %s)\n%s", how, resp.Status, nResp.Status, body)
		}
		if resp.Header.Get("Retry-After") != "" || strings.Contains(body, "refresh") ||
			strings.ReplaceAll(body, "alice", "nobody") != nBody {
			t.Errorf("HOLE (%s): the refusal differs from a nonexistent environment's:\n%s\nvs\n%s", how, body, nBody)
		}
		if n := lag.calls.Load() - before; n != 0 {
			t.Errorf("(%s) the resolver was asked %d times about alice's environment for bob", how, n)
		}
	}
	// Control: alice herself gets the "starting" answer (so the state is real).
	alice := browser(t)
	signIn(t, alice, f.gateway.URL, "alice", "alice-pw")
	if resp, _ := get(t, alice, f.gateway.URL+"/u/"+f.ns+"/alice/", headers["page load"]); resp.StatusCode != http.StatusAccepted {
		t.Errorf("control: alice's own page load got %s, want 202", resp.Status)
	}
}
