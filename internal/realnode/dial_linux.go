package realnode

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// DialContext connects to address from inside the node's network
// namespace. The host has no route to the pod network, and NetworkPolicy
// (kube-router) always admits the node's own traffic, as it must for the
// kubelet's probes: so a test can ask any pod's probe server what that
// pod reaches.
func (n *Node) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		// A socket belongs to the network namespace of the thread that
		// made it. The thread is locked and never unlocked: Go discards
		// it when this goroutine ends, so no other goroutine ever runs in
		// the node's namespace.
		runtime.LockOSThread()
		f, err := os.Open(netnsPath())
		if err != nil {
			done <- result{err: err}
			return
		}
		defer func() { _ = f.Close() }()
		if errno := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); errno != nil {
			done <- result{err: fmt.Errorf("entering %s: %w", netnsPath(), errno)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, address)
		done <- result{c, err}
	}()
	r := <-done
	return r.conn, r.err
}

// HTTPClient makes requests from inside the node's network namespace.
func (n *Node) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{DialContext: n.DialContext, DisableKeepAlives: true},
	}
}
