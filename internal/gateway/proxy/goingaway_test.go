package proxy

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/userland-dev/userland/internal/wsframe"
)

// frontFor puts p in front of upstream, counting tunnels that ended.
func frontFor(t *testing.T, p *Proxy, upstream *httptest.Server, ended *atomic.Int32) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.ServeHTTP(w, r, Request{Upstream: strings.TrimPrefix(upstream.URL, "http://"), Path: "/ws", Done: func() { ended.Add(1) }})
	}))
	t.Cleanup(s.Close)
	return s
}

// dialWebSocket opens a WebSocket through gw, closed when the test ends.
func dialWebSocket(ctx context.Context, t *testing.T, gw *httptest.Server) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(gw.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// A gateway shutting down closes an idle WebSocket with "going away", so
// the app in the browser reconnects rather than seeing a dropped
// connection.
func TestCloseWebSocketsSendsGoingAway(t *testing.T) {
	t.Parallel()
	p := New(nil)
	var ended atomic.Int32
	gw := frontFor(t, p, echoServer(t), &ended)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dialWebSocket(ctx, t, gw)
	if _, _, err := c.Read(ctx); err != nil { // the greeting
		t.Fatal(err)
	}
	start := time.Now()
	if n := p.CloseWebSockets(ctx); n != 1 {
		t.Errorf("closed %d WebSockets, want 1", n)
	}
	_, _, err := c.Read(ctx)
	if got := websocket.CloseStatus(err); got != websocket.StatusGoingAway {
		t.Fatalf("client read %v (status %d), want a close frame with 1001 going away", err, got)
	}
	t.Logf("closed with 1001 in %s", time.Since(start).Round(time.Microsecond))
	if ended.Load() != 1 {
		t.Errorf("the tunnel's end was reported %d times, want 1", ended.Load())
	}
	if n := p.CloseWebSockets(ctx); n != 0 {
		t.Errorf("a second shutdown found %d WebSockets, want none", n)
	}
}

// A frame the environment is half-way through sending is let through
// whole before the close frame: a close frame inside a frame's payload
// would corrupt the stream.
func TestCloseWebSocketsWaitsForTheFrameInFlight(t *testing.T) {
	t.Parallel()
	payload := strings.Repeat("x", 64<<10)
	halfSent, finish := make(chan struct{}), make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
			base64.StdEncoding.EncodeToString(sum[:]) + "\r\n\r\n")
		// One binary frame with a 64-bit length, sent in two halves.
		frame := binary.BigEndian.AppendUint64([]byte{0x80 | wsframe.OpBinary, 127}, uint64(len(payload)))
		_, _ = buf.Write(append(frame, payload[:len(payload)/2]...))
		_ = buf.Flush()
		close(halfSent)
		<-finish
		_, _ = buf.WriteString(payload[len(payload)/2:])
		_ = buf.Flush()
		time.Sleep(5 * time.Second) // the gateway, not the app, must end it
	}))
	t.Cleanup(upstream.Close)
	p := New(nil)
	var ended atomic.Int32
	gw := frontFor(t, p, upstream, &ended)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dialWebSocket(ctx, t, gw)
	c.SetReadLimit(1 << 20)
	<-halfSent
	time.Sleep(100 * time.Millisecond) // the half has passed the gateway
	closed := make(chan int, 1)
	go func() { closed <- p.CloseWebSockets(ctx) }()
	time.Sleep(200 * time.Millisecond) // the shutdown is waiting on the frame
	close(finish)
	_, data, err := c.Read(ctx)
	if err != nil || len(data) != len(payload) {
		t.Fatalf("the frame in flight: %d bytes, %v; want all %d", len(data), err, len(payload))
	}
	_, _, err = c.Read(ctx)
	if got := websocket.CloseStatus(err); got != websocket.StatusGoingAway {
		t.Fatalf("after the frame, client read %v (status %d), want 1001 going away", err, got)
	}
	if n := <-closed; n != 1 {
		t.Errorf("closed %d WebSockets, want 1", n)
	}
}
