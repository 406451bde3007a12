//go:build !unix

package proxy

import "net"

// pump copies src to dst until either fails, showing observe (if set)
// every read.
func (t *tunnel) pump(src, dst net.Conn, observe func([]byte), fromServer bool) {
	defer t.close()
	t.copyBuffered(src, dst, observe, fromServer)
}
