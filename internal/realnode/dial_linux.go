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
	var c net.Conn
	err := inNetns(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// Listen listens on address inside the node's network namespace: a test
// serves there what pods should or should not reach (a stand-in for a
// cloud's metadata address on the node, say).
func (n *Node) Listen(network, address string) (net.Listener, error) {
	var l net.Listener
	err := inNetns(func() error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	return l, err
}

// inNetns runs f on a thread in the node's network namespace. A socket
// belongs to the namespace of the thread that made it, and keeps it. The
// thread is locked and never unlocked: Go discards it when the goroutine
// ends, so no other goroutine ever runs in the node's namespace.
func inNetns(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := os.Open(netnsPath())
		if err != nil {
			done <- err
			return
		}
		defer func() { _ = ns.Close() }()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("entering %s: %w", netnsPath(), err)
			return
		}
		done <- f()
	}()
	return <-done
}

// HTTPClient makes requests from inside the node's network namespace.
func (n *Node) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{DialContext: n.DialContext, DisableKeepAlives: true},
	}
}
