package proxy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/userland-dev/userland/internal/gateway/session"
)

// refusingDial is an environment that refuses every connection (its app
// was killed from its own terminal, or it closed its listener on
// purpose): it counts the dials and reports each one.
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
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
}

// TestAdversaryRetryStopsWhenTheClientGoesAway: http.Transport dials with
// a context detached from the request's (context.WithoutCancel), so a
// retry loop inside DialContext is not told that the client left. A
// client that sends a request to its own refusing environment and drops
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
	before := env.dials.Load()
	time.Sleep(300 * time.Millisecond)
	if extra := env.dials.Load() - before; extra != 0 {
		t.Errorf("%d requests, all answered, then %d more dials within 300 ms: their retry loops outlived them", n, extra)
	}
}
