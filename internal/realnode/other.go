//go:build !linux

package realnode

import (
	"context"
	"net"
	"net/http"
	"os"
	"time"
)

// Teardown has nothing to remove where no node can run.
func Teardown(string) error { return Supported() }

// Leftovers is empty where no node can run.
func Leftovers(string) []string { return nil }

func (n *Node) up(context.Context) error { return Supported() }

func lock(context.Context, time.Duration, func(string, ...any)) (*os.File, error) {
	return nil, Supported()
}

func killNode(string) error { return Supported() }

// DialContext fails where no node can run.
func (n *Node) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, Supported()
}

// Listen fails where no node can run.
func (n *Node) Listen(string, string) (net.Listener, error) { return nil, Supported() }

// HTTPClient fails every request where no node can run.
func (n *Node) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: n.DialContext}}
}

// ImportImage fails where no node can run.
func (n *Node) ImportImage(string) error { return Supported() }

// Images fails where no node can run.
func (n *Node) Images() ([]string, error) { return nil, Supported() }
