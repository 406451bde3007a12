package proxy

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostileUpstream answers every upgrade with a 101 after delay, followed by
// extra headers of extra bytes and an early frame.
func hostileUpstream(t *testing.T, delay time.Duration, extra int) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		time.Sleep(delay)
		_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
			base64.StdEncoding.EncodeToString(sum[:]) + "\r\n")
		if extra > 0 {
			_, _ = buf.WriteString("X-Big: " + strings.Repeat("a", extra) + "\r\n")
		}
		_, _ = buf.WriteString("\r\n")
		_, _ = buf.Write([]byte{0x81, 2, 'h', 'i'}) // an early frame
		_ = buf.Flush()
		// Hold the upstream side open for a while; the gateway must end it.
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, _ = bufio.NewReader(conn).ReadByte()
	}))
	t.Cleanup(s.Close)
	return s
}

func rawUpgrade(t *testing.T, addr string) *net.TCPConn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	req := "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	return c.(*net.TCPConn)
}

func tracked(p *Proxy) int {
	p.webSockets.mu.Lock()
	defer p.webSockets.mu.Unlock()
	return len(p.webSockets.all)
}

// Clients that reset the connection mid-handshake (before, while or after
// the 101 is written) leave no tracked tunnel, report their end exactly
// once, and a concurrent shutdown neither panics nor hangs.
func TestAdversaryToday2MidHandshakeResetsLeakNothing(t *testing.T) {
	p := New(nil)
	var ended atomic.Int32
	up := hostileUpstream(t, 30*time.Millisecond, 0)
	gw := frontFor(t, p, up, &ended)
	addr := strings.TrimPrefix(gw.URL, "http://")
	const n = 60
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var shutdowns sync.WaitGroup
	shutdowns.Add(1)
	go func() { // shutdowns racing the switches
		defer shutdowns.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			p.CloseWebSockets(ctx)
			cancel()
			time.Sleep(time.Millisecond)
		}
	}()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := rawUpgrade(t, addr)
			time.Sleep(time.Duration(i%40) * time.Millisecond)
			_ = c.SetLinger(0) // RST
			_ = c.Close()
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for (tracked(p) != 0 || ended.Load() != n) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	shutdowns.Wait()
	if got := tracked(p); got != 0 {
		t.Errorf("%d tunnels still tracked after every client reset", got)
	}
	if got := ended.Load(); got != n {
		t.Errorf("ends reported %d, want %d", got, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if got := p.CloseWebSockets(ctx); got != 0 {
		t.Errorf("a shutdown found %d tunnels", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("shutdown took %s", d)
	}
}

// A hostile environment answers 101 with a 16 MiB header while its own
// student's client never reads. The gateway used to read any size of
// answer header (holding it all) and then block writing it to that
// client, its tunnel already tracked, so a shutdown waited its whole
// context. It now refuses an answer header over maxUpgradeAnswer with a
// 502: nothing is held, tracked or written to the client beyond that.
func TestAdversaryToday2StuckSwitchHoldsShutdown(t *testing.T) {
	p := New(nil)
	var ended atomic.Int32
	up := hostileUpstream(t, 0, 16<<20)
	gw := frontFor(t, p, up, &ended)
	resp := upgradeAnswer(t, gw)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("a 101 with a 16 MiB header was answered %d, want 502", resp.StatusCode)
	}
	if got := tracked(p); got != 0 {
		t.Errorf("%d tunnels tracked after a refused switch", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	n := p.CloseWebSockets(ctx)
	d := time.Since(start)
	t.Logf("CloseWebSockets found %d, returned after %s; ended: %d", n, d.Round(time.Millisecond), ended.Load())
	if n != 0 || d > time.Second {
		t.Errorf("shutdown found %d tunnels and took %s, want none at once", n, d.Round(time.Millisecond))
	}
}

// A 101 whose header is just under the bound still switches.
func TestUpgradeAnswerUnderTheBoundSwitches(t *testing.T) {
	p := New(nil)
	var ended atomic.Int32
	up := hostileUpstream(t, 0, maxUpgradeAnswer-1024)
	gw := frontFor(t, p, up, &ended)
	resp := upgradeAnswer(t, gw)
	if resp.StatusCode != http.StatusSwitchingProtocols || len(resp.Header.Get("X-Big")) != maxUpgradeAnswer-1024 {
		t.Errorf("a 101 with a header under the bound: %d, X-Big of %d bytes", resp.StatusCode, len(resp.Header.Get("X-Big")))
	}
}

// upgradeAnswer asks gw for a WebSocket and reads the answer's header;
// the connection closes when the test ends.
func upgradeAnswer(t *testing.T, gw *httptest.Server) *http.Response {
	t.Helper()
	c := rawUpgrade(t, strings.TrimPrefix(gw.URL, "http://"))
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the gateway's answer: %v", err)
	}
	return resp
}
