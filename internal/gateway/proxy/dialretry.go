package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// StartupDialBudget is how long a connection to an environment is retried
// while the failure says the environment is not reachable yet, rather
// than answering 502 at once. An environment turns Ready when its pod
// does, and its Service's DNS record follows a moment later: on a real
// node the first request after Ready found no DNS record, and CoreDNS
// then caches that answer for up to 5 s. Nothing has been sent when a
// dial fails, so retrying is safe for every method.
//
// A refused connection is not retried: the environment's headless
// Service names its Ready pod itself, so an address that refuses is not
// (or no longer) that pod's, such as a cached record of a pod that is
// gone. Waiting on it would wait for whichever pod gets the address next
// to listen: with the same template, another user's environment.
const StartupDialBudget = 8 * time.Second

// DialTimeout bounds one connection attempt to an environment. A pod that
// is gone leaves an address nothing answers on: without a bound a dial
// there waits for the kernel's SYN retries (over a minute) while the
// person stares at a blank tab.
const DialTimeout = 5 * time.Second

// boundedDial gives every attempt of dial, including ones supplied from
// outside (`userland dev --real-node` dials from inside the node), at most
// timeout.
func boundedDial(dial Dial, timeout time.Duration) Dial {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return dial(ctx, network, addr)
	}
}

// retryingDial wraps dial so that a name not (yet) found is retried, with
// backoff, for up to budget and while ctx lives. Other failures (a refused
// connection, a timeout, no route) are returned at once: they are not the
// short gap after a start.
//
// http.Transport dials with the request's values but not its cancellation
// (context.WithoutCancel: a dial may serve a later request). So the
// request's own context, which ServeHTTP puts among the values
// (withRequestContext), ends the waits between attempts too: a client that
// drops its request must not leave the gateway retrying for it.
func retryingDial(dial Dial, budget time.Duration, sleep func(context.Context, time.Duration) error) Dial {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		deadline := time.Now().Add(budget)
		wait := 50 * time.Millisecond
		waitCtx := ctx
		req, _ := ctx.Value(requestContextKey{}).(context.Context)
		if req != nil {
			var cancel context.CancelFunc
			waitCtx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(req, cancel)()
		}
		for {
			// Asked directly, not through waitCtx: AfterFunc cancels it
			// from a goroutine of its own, a moment after the request
			// ends. And http.Transport may start this dial after the
			// request already ended (its dialing goroutine ran late).
			if req != nil && req.Err() != nil {
				return nil, fmt.Errorf("dial %s: the request ended: %w", addr, context.Cause(req))
			}
			c, err := dial(ctx, network, addr)
			if err == nil || !notReachableYet(err) || time.Now().Add(wait).After(deadline) {
				return c, err
			}
			if waitCtx.Err() != nil {
				return nil, err
			}
			if serr := sleep(waitCtx, wait); serr != nil {
				return nil, err
			}
			wait = min(2*wait, time.Second)
		}
	}
}

// requestContextKey holds, among a dial context's values, the context of
// the request the dial is for.
type requestContextKey struct{}

// withRequestContext records ctx as the request's own among its values, so
// that a retrying dial sees the request end even through http.Transport's
// detached dial context.
func withRequestContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, requestContextKey{}, ctx)
}

// notReachableYet says whether err is what a just-started environment
// answers before its Service catches up: a name the cluster's DNS does not
// know yet (or answers SERVFAIL for). A refused connection is not (see
// StartupDialBudget), nor a lookup that timed out: the DNS server is then
// overloaded or unreachable, and asking it again for every request would
// only add to its load (Go marks such a DNSError temporary as well as
// timed out).
func notReachableYet(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) && !dnsErr.IsTimeout && (dnsErr.IsNotFound || dnsErr.IsTemporary)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
