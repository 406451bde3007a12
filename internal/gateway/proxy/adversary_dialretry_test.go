package proxy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/userland-dev/userland/internal/gateway/session"
)

// refusingDial is an environment that cannot be reached, in the way that
// is retried (its name has no record: no Ready pod): it counts the dials
// and reports each one.
type refusingDial struct {
	dials atomic.Int64
	each  chan struct{}
}

func (d *refusingDial) dial(context.Context, string, string) (net.Conn, error) {
	d.dials.Add(1)
	select {
	case d.each <- struct{}{}:
	default:
	}
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "taro.cs101.svc.cluster.local", IsNotFound: true}}
}

// TestAdversaryRetryStopsWhenTheClientGoesAway: http.Transport dials with
// a context detached from the request's (context.WithoutCancel), so a
// retry loop inside DialContext is not told that the client left. A
// client that sends a request to its own unreachable environment and drops
// it at once leaves the gateway retrying for the whole StartupDialBudget
// (8 s, about a dozen connects) with nothing held on the client's side:
// plain requests have no per-user cap, so that is a free amplification of
// goroutines and connects. The retry must end with the request.
func TestAdversaryRetryStopsWhenTheClientGoesAway(t *testing.T) {
	t.Parallel()
	env := &refusingDial{each: make(chan struct{}, 1)}
	p := NewWithDial(nil, 0, env.dial)
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest(http.MethodPost, "/submit", nil).WithContext(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.ServeHTTP(httptest.NewRecorder(), r, Request{Upstream: "taro.cs101.svc.cluster.local:8080", Path: "/submit",
			Identity: session.Identity{User: "taro"}})
	}()
	<-env.each // the first dial was refused; the retry loop sleeps
	cancel()   // the client goes away
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ServeHTTP did not return after the client went away")
	}
	after := env.dials.Load()
	// The backoff is 50, 100, 200 ms: a loop still running dials twice
	// more within 400 ms.
	time.Sleep(400 * time.Millisecond)
	if diff := cmp.Diff(after, env.dials.Load()); diff != "" {
		t.Errorf("dials after the request ended (-at return +400 ms later):\n%s", diff)
	}
}

// TestAdversaryAbandonedRequestsLeaveNoDialers: many requests dropped at
// once leave no retry loops behind (measured as dials still made after
// every handler returned).
func TestAdversaryAbandonedRequestsLeaveNoDialers(t *testing.T) {
	t.Parallel()
	env := &refusingDial{each: make(chan struct{}, 1)}
	p := NewWithDial(nil, 0, env.dial)
	const n = 200
	var wg sync.WaitGroup
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		wg.Go(func() {
			defer cancel()
			r := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
			p.ServeHTTP(httptest.NewRecorder(), r, Request{Upstream: "taro.cs101.svc.cluster.local:8080", Path: "/",
				Identity: session.Identity{User: "taro"}})
		})
	}
	wg.Wait()
	// A dial already past its check when its handler returned is still
	// counted a moment later; that is not a loop. A loop that outlived its
	// request dials again within the window after this (its waits are 50,
	// 100, 200 ms from its first attempt).
	time.Sleep(50 * time.Millisecond)
	before := env.dials.Load()
	time.Sleep(300 * time.Millisecond)
	extra := env.dials.Load() - before
	t.Logf("%d requests made %d dials in all", n, env.dials.Load())
	if extra != 0 {
		t.Errorf("%d requests, all answered, then %d more dials within 300 ms: their retry loops outlived them", n, extra)
	}
}

// TestAdversaryDNSTimeoutIsNotRetried: retryingDial's comment says a
// timeout is returned at once, but a DNS timeout is a *net.DNSError with
// IsTimeout and IsTemporary set, and IsTemporary is retried. When CoreDNS
// is overloaded (its answers time out), every request to every
// environment would then ask it again and again for 8 s (plus the last
// lookup's own timeout): a retry storm against the one thing that is
// already failing, and each request held up to about 13 s instead of 5.
func TestAdversaryDNSTimeoutIsNotRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		err       error
		wantDials int
	}{
		{name: "lookup timed out", err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "i/o timeout", Name: "taro.cs101.svc.cluster.local", Server: "10.96.0.10:53", IsTimeout: true, IsTemporary: true}}, wantDials: 1},
		{name: "no record yet is still retried", err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "taro.cs101.svc.cluster.local", IsNotFound: true}}, wantDials: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dials := 0
			d := retryingDial(func(context.Context, string, string) (net.Conn, error) {
				dials++
				if dials < 3 {
					return nil, tc.err
				}
				c, _ := net.Pipe()
				return c, nil
			}, time.Minute, func(context.Context, time.Duration) error { return nil })
			if c, _ := d(context.Background(), "tcp", "taro.cs101.svc.cluster.local:8080"); c != nil {
				_ = c.Close()
			}
			if diff := cmp.Diff(tc.wantDials, dials); diff != "" {
				t.Errorf("dials (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAdversaryRetryStillServesAWaitingRequest: with the retries tied to
// the request, a request that stays still gets through once the
// environment answers (through the Transport, not just retryingDial).
func TestAdversaryRetryStillServesAWaitingRequest(t *testing.T) {
	t.Parallel()
	up := echoServer(t)
	var dials atomic.Int64
	p := NewWithDial(nil, 0, func(ctx context.Context, network, _ string) (net.Conn, error) {
		if dials.Add(1) <= 2 {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "taro.cs101.svc.cluster.local", IsNotFound: true}}
		}
		var d net.Dialer
		return d.DialContext(ctx, network, up.Listener.Addr().String())
	})
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil), Request{Upstream: "taro.cs101.svc.cluster.local:8080", Path: "/",
		Identity: session.Identity{User: "taro"}})
	if diff := cmp.Diff(http.StatusOK, rec.Code); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(int64(3), dials.Load()); diff != "" {
		t.Errorf("dials (-want +got):\n%s", diff)
	}
}

// TestAdversaryRefusedAddressIsNotWaitedOn: a refused connection after an
// environment is Ready means the address the cluster's DNS gave is not its
// pod's (or no longer is): a headless Service's record names the Ready
// pod itself, and CoreDNS may answer from its cache for some seconds after
// the pod is gone (the environment restarted and got a new address).
// Retrying that address for 8 s waits for the next pod the CNI gives it to
// start listening: with the same template, another user's environment, on
// the same port. The request, with taro's identity headers and cookies on
// taro's origin, is then answered by hanako's environment. Here taro's
// stale address is a port that refuses at first and where hanako's app
// starts listening a moment later.
func TestAdversaryRefusedAddressIsNotWaitedOn(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stale := l.Addr().String() // taro's old pod's address, freed
	_ = l.Close()
	refused := make(chan struct{}, 1)
	p := NewWithDial(nil, 0, func(ctx context.Context, network, _ string) (net.Conn, error) {
		// The cluster's DNS still answers taro's name with the old address.
		var d net.Dialer
		c, err := d.DialContext(ctx, network, stale)
		if err != nil {
			select {
			case refused <- struct{}{}:
			default:
			}
		}
		return c, err
	})
	go func() {
		<-refused
		// hanako's new pod got the freed address; its app starts.
		l, err := net.Listen("tcp", stale)
		if err != nil {
			return // the port was taken meanwhile: nothing to show
		}
		s := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("hanako's files"))
		})}
		t.Cleanup(func() { _ = s.Close() })
		go func() { _ = s.Serve(l) }()
	}()
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil), Request{Upstream: "taro.cs101.svc.cluster.local:8080", Path: "/",
		Identity: session.Identity{User: "taro"}})
	if rec.Code != http.StatusBadGateway {
		t.Errorf("taro's request got %d %q from whatever listened at his environment's old address later, want 502", rec.Code, rec.Body.String())
	}
}
