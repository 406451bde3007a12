package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/gateway/proxy"
)

// laggingResolver answers as EndpointSliceResolver does while an
// environment's slice does not yet list its Ready pod (err), then as next.
type laggingResolver struct {
	err   atomic.Pointer[error]
	next  proxy.Resolver
	calls atomic.Int32
}

func (l *laggingResolver) Resolve(ctx context.Context, namespace, name string, uid types.UID, port int32) (string, error) {
	l.calls.Add(1)
	if err := l.err.Load(); err != nil {
		return "", fmt.Errorf("%s/%s: %w", namespace, name, *err)
	}
	return l.next.Resolve(ctx, namespace, name, uid, port)
}

// TestReadyWithoutAnAddressYetAsksToWait: the controller calls an
// environment Ready from its pod, and the EndpointSlice controller lists
// the pod a moment later; on a loaded node (the real node after a wake)
// the gap outlasted the resolver's wait, and the person got a dead-end 502
// page that never reloaded. A page load now gets the progress page, which
// reloads itself into the environment once the address is listed; a
// script gets a 503 to retry. Several ready pods stay a 502: that address
// cannot be trusted, and waiting would not change it.
func TestReadyWithoutAnAddressYetAsksToWait(t *testing.T) {
	t.Parallel()
	lag := &laggingResolver{}
	lag.err.Store(&gateway.ErrNoReadyEndpoint)
	gwClock := clocktesting.NewFakePassiveClock(time.Now())
	f := setupWith(t, func(o *gateway.Options) {
		lag.next = o.Resolver
		o.Resolver = lag
	}, func(s *gateway.Server) { s.Clock = gwClock })
	alice := browser(t)
	signIn(t, alice, f.gateway.URL, "alice", "alice-pw")
	envURL := f.gateway.URL + "/u/" + f.ns + "/alice/"
	navigate := map[string]string{"Sec-Fetch-Mode": "navigate", "Accept": "text/html"}

	resp, body := get(t, alice, envURL, navigate)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(body, "<h1>Starting ") || !strings.Contains(body, `http-equiv="refresh" content="1"`) {
		t.Fatalf("a page load of a Ready environment with no address yet: %s, want 202 and the reloading progress page\n%s", resp.Status, body)
	}
	resp, body = get(t, alice, envURL+"api", map[string]string{"Accept": "application/json"})
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "2" || !strings.Contains(body, "starting") {
		t.Fatalf("a script's request: %s (Retry-After %q) %s, want 503 with Retry-After 2", resp.Status, resp.Header.Get("Retry-After"), body)
	}
	if n := f.metric(t, "userland_gateway_unresolved_total", nil); n != 2 {
		t.Errorf("userland_gateway_unresolved_total = %v, want 2", n)
	}

	// The slice catches up: the page's next reload is the environment.
	lag.err.Store(nil)
	resp, body = get(t, alice, envURL, navigate)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"user":"alice"`) {
		t.Fatalf("the reload once the address is listed: %s %s", resp.Status, body)
	}

	lag.err.Store(&gateway.ErrSeveralReadyPods)
	resp, body = get(t, alice, envURL, navigate)
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, "refresh") {
		t.Errorf("two ready pods: %s, want a 502 that does not reload\n%s", resp.Status, body)
	}

	// Ready for minutes and still no address: not late, missing. The
	// page says so rather than reloading for ever.
	lag.err.Store(&gateway.ErrNoReadyEndpoint)
	ul, err := getUserland(context.Background(), f.ns, "alice")
	if err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(ul.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue {
		t.Fatalf("alice's Ready condition: %+v", ready)
	}
	// The gateway's clock, three minutes after the controller's stamp.
	gwClock.SetTime(ready.LastTransitionTime.Add(3 * time.Minute))
	resp, body = get(t, alice, envURL, navigate)
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, "refresh") {
		t.Errorf("no address three minutes after Ready: %s, want a 502 that does not reload\n%s", resp.Status, body)
	}
	t.Logf("resolver asked %d times", lag.calls.Load())
}
