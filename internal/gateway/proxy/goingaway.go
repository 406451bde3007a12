package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/userland-dev/userland/internal/wsframe"
)

// goingAway is a server's close frame with status 1001 (RFC 6455, 7.4.1:
// "an endpoint is going away, such as a server going down"). Browsers
// report it to the app, which reconnects, to another replica.
var goingAway = func() []byte {
	reason := "gateway restarting"
	f := []byte{0x80 | wsframe.OpClose, byte(2 + len(reason)), 0, 0}
	binary.BigEndian.PutUint16(f[2:], 1001)
	return append(f, reason...)
}()

// midFrameGrace is how long a shutdown lets a frame the environment is
// sending finish before the connection is cut without a close frame.
const midFrameGrace = 2 * time.Second

// webSockets tracks the proxy's WebSocket tunnels for CloseWebSockets.
type webSockets struct {
	mu  sync.Mutex
	all map[*tunnel]struct{}
}

func (w *webSockets) add(t *tunnel) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.all == nil {
		w.all = map[*tunnel]struct{}{}
	}
	w.all[t] = struct{}{}
}

func (w *webSockets) remove(t *tunnel) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.all, t)
}

// CloseWebSockets ends every WebSocket the proxy tunnels, sending each
// client a close frame (1001, going away) at the next frame boundary of
// what the environment is sending, so the app in the browser sees a clean
// close and reconnects instead of a dropped connection. A frame still
// unfinished after a short grace is cut. It returns when every tunnel has
// ended or ctx is done, with how many tunnels it closed.
func (p *Proxy) CloseWebSockets(ctx context.Context) int {
	p.webSockets.mu.Lock()
	tunnels := make([]*tunnel, 0, len(p.webSockets.all))
	for t := range p.webSockets.all {
		tunnels = append(tunnels, t)
	}
	p.webSockets.mu.Unlock()
	for _, t := range tunnels {
		t.closing.Store(true)
		// Wakes the environment-to-client pump, which then writes the
		// close frame itself: only it knows where frames end.
		_ = t.b.SetReadDeadline(time.Now())
	}
	for _, t := range tunnels {
		select {
		case <-t.ended:
		case <-ctx.Done():
			return len(tunnels)
		}
	}
	return len(tunnels)
}

// shutdownStep is what the environment-to-client pump does after a read
// error or a write while the tunnel is closing. It returns true when the
// pump should stop.
func (t *tunnel) shutdownStep(readErr error) (stop bool) {
	if !t.closing.Load() || t.server == nil {
		return readErr != nil
	}
	if readErr != nil && !errors.Is(readErr, os.ErrDeadlineExceeded) {
		return true
	}
	if t.server.AtFrameBoundary() {
		_ = t.a.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = t.a.Write(goingAway)
		return true
	}
	if readErr == nil {
		return false
	}
	// Mid-frame: let the rest of it through, once.
	if t.graceUsed {
		return true
	}
	t.graceUsed = true
	_ = t.b.SetReadDeadline(time.Now().Add(midFrameGrace))
	return false
}
