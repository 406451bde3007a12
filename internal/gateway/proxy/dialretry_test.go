package proxy

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRetryingDial(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	notFound := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "u.class.svc.cluster.local", IsNotFound: true}}
	unreachable := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.EHOSTUNREACH}}
	tests := []struct {
		name string
		// failures are the errors of the first dials; then it connects.
		failures  []error
		budget    time.Duration
		wantDials int
		wantErr   error
	}{
		{name: "connects at once", wantDials: 1},
		{name: "refused is not retried (the address is not the environment's pod)", failures: []error{refused}, budget: time.Minute, wantDials: 1, wantErr: refused},
		{name: "no DNS record yet, then up", failures: []error{notFound, notFound, notFound}, budget: time.Minute, wantDials: 4},
		{name: "no route is not retried", failures: []error{unreachable}, budget: time.Minute, wantDials: 1, wantErr: unreachable},
		{name: "no record past the budget", failures: []error{notFound, notFound, notFound, notFound}, budget: 100 * time.Millisecond, wantDials: 2, wantErr: notFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dials := 0
			dial := func(context.Context, string, string) (net.Conn, error) {
				dials++
				if dials <= len(tc.failures) {
					return nil, tc.failures[dials-1]
				}
				c, _ := net.Pipe()
				return c, nil
			}
			var slept time.Duration
			// The clock is the slept time: no real waiting.
			sleep := func(context.Context, time.Duration) error { return nil }
			d := retryingDial(dial, tc.budget, func(ctx context.Context, d time.Duration) error {
				slept += d
				return sleep(ctx, d)
			})
			c, err := d(context.Background(), "tcp", "u.class.svc.cluster.local:8080")
			if c != nil {
				_ = c.Close()
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantDials, dials); diff != "" {
				t.Errorf("dials (-want +got):\n%s (slept %s)", diff, slept)
			}
		})
	}
}

func TestRetryingDialStopsWithTheRequest(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}}
	dials := 0
	d := retryingDial(func(context.Context, string, string) (net.Conn, error) {
		dials++
		return nil, refused
	}, time.Minute, sleepCtx)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client went away
	if _, err := d(ctx, "tcp", "x:1"); !errors.Is(err, refused) {
		t.Errorf("error = %v, want the dial's own", err)
	}
	if dials != 1 {
		t.Errorf("dialled %d times after the request ended, want 1", dials)
	}
}

// TestBoundedDialEndsAHangingDial: a dial that would wait for ever (an
// address nothing answers on, through a supplied dial without a timeout
// of its own) ends at the bound with the context's error.
func TestBoundedDialEndsAHangingDial(t *testing.T) {
	t.Parallel()
	hanging := func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	start := time.Now()
	_, err := boundedDial(hanging, 200*time.Millisecond)(context.Background(), "tcp", "10.0.0.1:8080")
	took := time.Since(start)
	t.Logf("the hanging dial ended after %v", took)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the deadline's", err)
	}
	if took > 30*time.Second {
		t.Errorf("took %v: the bound did not apply", took)
	}
}

// TestRetryingDialAsksTheRequestItself: http.Transport dials with a
// context detached from the request's (context.WithoutCancel), carrying
// the request's own among its values, and may start the dial after the
// request ended; and the request's end reaches the waits only through an
// AfterFunc, a moment later. The request itself is asked before every
// attempt.
func TestRetryingDialAsksTheRequestItself(t *testing.T) {
	notFound := &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}}
	tests := []struct {
		name string
		// endsAt is the attempt during which the request ends (0: before
		// the first).
		endsAt    int
		wantDials int
	}{
		{name: "a dial started after its request ended makes no attempt", endsAt: 0, wantDials: 0},
		{name: "a request ending during an attempt gets no other", endsAt: 1, wantDials: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, end := context.WithCancel(context.Background())
			if tc.endsAt == 0 {
				end()
			}
			dials := 0
			d := retryingDial(func(context.Context, string, string) (net.Conn, error) {
				dials++
				if dials == tc.endsAt {
					end()
				}
				return nil, notFound
			}, time.Minute, func(context.Context, time.Duration) error { return nil }) // waits that do not notice the end
			dialCtx := context.WithoutCancel(withRequestContext(req))
			if c, err := d(dialCtx, "tcp", "x:1"); err == nil {
				_ = c.Close()
				t.Fatal("dial succeeded")
			}
			end()
			if diff := cmp.Diff(tc.wantDials, dials); diff != "" {
				t.Errorf("attempts (-want +got):\n%s", diff)
			}
		})
	}
}
