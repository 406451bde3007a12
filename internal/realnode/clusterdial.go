package realnode

import (
	"context"
	"fmt"
	"net"
	"strings"
)

// ClusterDialContext connects to address as a pod would: a name such as
// <service>.<namespace>.svc.cluster.local is resolved by the cluster's DNS
// (CoreDNS behind ClusterDNSIP) and the connection is made from inside the
// node's network namespace, like DialContext. A process on the host, such
// as `userland dev --real-node`'s gateway, reaches environments by their
// Service names with it: the host has neither a route to the pod network
// nor the cluster's DNS in /etc/resolv.conf.
func (n *Node) ClusterDialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if net.ParseIP(host) != nil {
		return n.DialContext(ctx, network, address)
	}
	resolver := &net.Resolver{
		PreferGo: true,
		// Whatever nameserver the host's resolv.conf names, ask the
		// cluster's, from inside the node.
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return n.DialContext(ctx, network, net.JoinHostPort(ClusterDNSIP, "53"))
		},
	}
	// A trailing dot keeps the host's search domains out of the question.
	fqdn := host
	if !strings.HasSuffix(fqdn, ".") {
		fqdn += "."
	}
	addrs, err := resolver.LookupHost(ctx, fqdn)
	if err != nil {
		return nil, fmt.Errorf("resolving %s with the cluster's DNS: %w", host, err)
	}
	var firstErr error
	for _, a := range addrs {
		c, err := n.DialContext(ctx, network, net.JoinHostPort(a, port))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}
