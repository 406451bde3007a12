//go:build !unix

package proxy

import "net"

// pump copies src to dst until either fails.
func (t *tunnel) pump(src, dst net.Conn) {
	defer t.close()
	t.copyBuffered(src, dst)
}
