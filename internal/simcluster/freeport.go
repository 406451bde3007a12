package simcluster

import (
	"net"
	"strconv"
)

// FreePort asks the kernel for a free loopback port: the one helper the
// cluster, `userland dev`, the benchmarks and the tests use. Another
// process could take the port before it is bound; the program binding it
// then fails to start and says so (Start then tries again on fresh ports,
// for etcd and the API server).
func FreePort() (int, error) {
	return FreePortOn("127.0.0.1")
}

// FreePortOn is FreePort on another local address (a veth's, for
// internal/realnode).
func FreePortOn(address string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(address, "0"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreeAddr is FreePort as a "127.0.0.1:<port>" address.
func FreeAddr() (string, error) {
	port, err := FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}
