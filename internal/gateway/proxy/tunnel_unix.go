//go:build unix

package proxy

import (
	"errors"
	"net"
	"syscall"
)

// pump copies src to dst until either fails, showing observe (if set)
// every read. Between messages it holds no
// buffer: it waits for src to become readable through the runtime's
// poller, and only then borrows a buffer for one non-blocking read. An
// idle WebSocket therefore costs its two parked goroutines and sockets,
// not 64 KiB of buffers.
//
// fromServer marks the environment-to-client direction, which also ends
// the tunnel with a close frame when CloseWebSockets asks (shutdownStep).
func (t *tunnel) pump(src, dst net.Conn, observe func([]byte), fromServer bool) {
	defer t.close()
	sc, ok := src.(syscall.Conn)
	if !ok {
		t.copyBuffered(src, dst, observe, fromServer) // e.g. TLS: bytes are only readable through src
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	for {
		var (
			buf  *[]byte
			n    int
			rerr error
		)
		err := raw.Read(func(fd uintptr) bool {
			buf = copyBuffers.Get().(*[]byte)
			for {
				n, rerr = syscall.Read(int(fd), *buf)
				if !errors.Is(rerr, syscall.EINTR) {
					break
				}
			}
			if errors.Is(rerr, syscall.EAGAIN) {
				copyBuffers.Put(buf)
				buf = nil
				return false // park until readable
			}
			return true
		})
		if err != nil || rerr != nil || n <= 0 {
			if buf != nil {
				copyBuffers.Put(buf)
			}
			if fromServer && err != nil && !t.shutdownStep(err) {
				continue // closing, mid-frame: let the frame finish
			}
			return // closed, reset, end of stream, or closed for shutdown
		}
		if observe != nil {
			observe((*buf)[:n])
		}
		_, werr := dst.Write((*buf)[:n])
		copyBuffers.Put(buf)
		if werr != nil {
			return
		}
		if fromServer && t.closing.Load() && t.shutdownStep(nil) {
			return
		}
	}
}
