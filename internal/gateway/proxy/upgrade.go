package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/wsframe"
)

// maxUpgradeAnswer bounds the header of an environment's answer to an
// upgrade (and the frames read with it): net/http's reader has no bound
// of its own, so a hostile environment could make the gateway hold any
// amount. The gateway's own server takes 64 KiB of request header.
const maxUpgradeAnswer = 64 << 10

// errAnswerTooLarge ends reading an answer past maxUpgradeAnswer.
var errAnswerTooLarge = errors.New("the environment's answer is too large")

// unlimited is an answerLimit's left once the answer's header is read.
const unlimited = -1

// answerLimit reads at most left bytes, then fails with
// errAnswerTooLarge, until left is unlimited.
type answerLimit struct {
	r    io.Reader
	left int
}

func (a *answerLimit) Read(b []byte) (int, error) {
	if a.left == unlimited {
		return a.r.Read(b)
	}
	if a.left == 0 {
		return 0, errAnswerTooLarge
	}
	if len(b) > a.left {
		b = b[:a.left]
	}
	n, err := a.r.Read(b)
	a.left -= n
	return n, err
}

// handshakeTimeout bounds dialling the environment and reading its answer
// to an upgrade request; the tunnel itself has no deadline.
const handshakeTimeout = 30 * time.Second

// isUpgrade reports an HTTP/1.1 protocol switch (WebSocket and the like).
func isUpgrade(r *http.Request) bool {
	return r.ProtoMajor == 1 && r.Header.Get("Upgrade") != "" &&
		httpguts.HeaderValuesContainsToken(r.Header["Connection"], "Upgrade")
}

// hopHeaders are the HTTP/1.1 hop-by-hop headers (RFC 9110, 7.6.1), which a
// proxy never forwards as they are.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopHeaders(h http.Header) {
	for _, f := range h["Connection"] {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// serveUpgrade forwards a protocol switch. httputil.ReverseProxy would do
// it too, but it holds two 32 KiB copy buffers and a goroutine per
// connection for as long as a WebSocket stays open, idle or not; a
// classroom keeps thousands open. Here the request and the 101 answer go
// through net/http's own reader and writer, and the tunnel is two
// goroutines that borrow a buffer only while bytes are moving (see
// tunnel).
func (p *Proxy) serveUpgrade(w http.ResponseWriter, r *http.Request, req Request) {
	tunnelled := false
	defer func() {
		if !tunnelled && req.Done != nil {
			req.Done()
		}
	}()
	protocol := r.Header.Get("Upgrade")
	out := r.Clone(r.Context())
	out.RequestURI = ""
	removeHopHeaders(out.Header)
	p.rewrite(&httputil.ProxyRequest{In: r, Out: out}, req)
	out.Header.Set("Connection", "Upgrade")
	out.Header.Set("Upgrade", protocol)
	if req.Rules.FiltersMessages() {
		// Compressed messages cannot be measured or matched.
		withoutDeflate(out.Header)
	}

	ctx, cancel := context.WithTimeout(r.Context(), handshakeTimeout)
	defer cancel()
	upstream, err := p.dial(ctx, "tcp", req.Upstream)
	if err != nil {
		p.unavailable(w, r)
		return
	}
	deadline, _ := ctx.Deadline()
	_ = upstream.SetDeadline(deadline)
	answer := &answerLimit{r: upstream, left: maxUpgradeAnswer}
	upReader := bufio.NewReaderSize(answer, 4<<10)
	if err := out.Write(upstream); err != nil {
		_ = upstream.Close()
		p.unavailable(w, r)
		return
	}
	resp, err := http.ReadResponse(upReader, out)
	if errors.Is(err, errAnswerTooLarge) {
		_ = upstream.Close()
		http.Error(w, fmt.Sprintf("the environment's answer to the upgrade has a header over %d KiB", maxUpgradeAnswer>>10), http.StatusBadGateway)
		return
	}
	if err != nil {
		_ = upstream.Close()
		p.unavailable(w, r)
		return
	}
	answer.left = unlimited
	if resp.StatusCode != http.StatusSwitchingProtocols {
		// The environment declined: relay its answer as it is.
		defer func() { _ = upstream.Close() }()
		defer func() { _ = resp.Body.Close() }()
		removeHopHeaders(resp.Header)
		filterResponse(resp.Header, req.CookiePath)
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_ = upstream.SetDeadline(time.Time{})
		_, _ = io.Copy(w, resp.Body)
		return
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), protocol) {
		_ = upstream.Close()
		http.Error(w, fmt.Sprintf("the environment switched to %q, not the requested %q", resp.Header.Get("Upgrade"), protocol), http.StatusBadGateway)
		return
	}
	client, clientBuf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = upstream.Close()
		http.Error(w, "this connection cannot switch protocols", http.StatusInternalServerError)
		return
	}
	if err := p.switchProtocols(client, clientBuf, upstream, upReader, resp, req, deadline); err != nil {
		_ = client.Close()
		_ = upstream.Close()
		return
	}
	tunnelled = true
}

// unavailable answers like a failed plain request: the environment may be
// starting, so retrying soon is the right thing for a client to do.
func (p *Proxy) unavailable(w http.ResponseWriter, r *http.Request) {
	if r.Context().Err() != nil {
		return // the client went away
	}
	w.Header().Set("Retry-After", "5")
	http.Error(w, "the environment is not answering yet; retry in a few seconds", http.StatusBadGateway)
}

// switchProtocols sends the 101 answer, hands over what either side's
// reader already buffered, and runs the tunnel until one side closes.
func (p *Proxy) switchProtocols(client net.Conn, clientBuf *bufio.ReadWriter, upstream net.Conn, upReader *bufio.Reader, resp *http.Response, req Request, handshake time.Time) error {
	// net/http's read deadlines no longer apply to a hijacked connection,
	// and the handshake's deadline must not apply to the tunnel's reads.
	// Its writes keep it until the tunnel runs: a client that does not
	// read the 101, or an environment that does not read the frames the
	// client sent behind its request, cannot hold the switch (and a
	// shutdown waiting for it) for ever.
	if err := errors.Join(client.SetReadDeadline(time.Time{}), client.SetWriteDeadline(handshake),
		upstream.SetReadDeadline(time.Time{}), upstream.SetWriteDeadline(handshake)); err != nil {
		return fmt.Errorf("setting deadlines: %w", err)
	}
	header := resp.Header.Clone()
	removeHopHeaders(header)
	filterResponse(header, req.CookiePath)
	header.Set("Connection", "Upgrade")
	header.Set("Upgrade", resp.Header.Get("Upgrade"))
	var server *wsframe.Reader
	if strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") {
		server = &wsframe.Reader{}
	}
	t := &tunnel{a: client, b: upstream, done: req.Done, ended: make(chan struct{}), server: server}
	if server != nil {
		// Tracked before the client can see the 101 or a frame the
		// environment sent behind it: a shutdown from the moment the
		// client could use the WebSocket finds it and says going away.
		p.webSockets.add(t)
		t.untrack = func() { p.webSockets.remove(t) }
	}
	if _, err := fmt.Fprintf(clientBuf, "HTTP/1.1 101 %s\r\n", http.StatusText(http.StatusSwitchingProtocols)); err != nil {
		return t.abandon(fmt.Errorf("writing the 101 answer: %w", err))
	}
	if err := header.Write(clientBuf); err != nil {
		return t.abandon(fmt.Errorf("writing the 101 answer: %w", err))
	}
	if _, err := clientBuf.WriteString("\r\n"); err != nil {
		return t.abandon(fmt.Errorf("writing the 101 answer: %w", err))
	}
	// Frames the environment sent right behind its answer.
	if n := upReader.Buffered(); n > 0 {
		early, _ := upReader.Peek(n)
		if server != nil {
			_ = server.Feed(early)
		}
		if _, err := clientBuf.Write(early); err != nil {
			return t.abandon(fmt.Errorf("forwarding early frames: %w", err))
		}
	}
	if err := clientBuf.Flush(); err != nil {
		return t.abandon(fmt.Errorf("writing the 101 answer: %w", err))
	}
	observe := clientActivity(resp.Header.Get("Upgrade"), req)
	// Frames the client sent right behind its request.
	if n := clientBuf.Reader.Buffered(); n > 0 {
		early, _ := clientBuf.Peek(n)
		observe(early)
		if _, err := upstream.Write(early); err != nil {
			return t.abandon(fmt.Errorf("forwarding early frames: %w", err))
		}
	}
	if err := errors.Join(client.SetWriteDeadline(time.Time{}), upstream.SetWriteDeadline(time.Time{})); err != nil {
		return t.abandon(fmt.Errorf("clearing deadlines: %w", err))
	}
	// Both bufio readers are dropped here; the tunnel reads the sockets.
	var fromServer func([]byte)
	if server != nil {
		fromServer = func(b []byte) { _ = server.Feed(b) }
	}
	go t.pump(client, upstream, observe, false)
	go t.pump(upstream, client, fromServer, true)
	return nil
}

// clientActivity follows what the client sends on a switched connection
// and reports the messages that count. It reads WebSocket frame headers
// (and, when the rules match content, a message's first bytes) and skips
// payloads. A stream that stops parsing as WebSocket, and any other
// protocol, counts on every read: unsure means in use, never stopped
// under someone.
func clientActivity(protocol string, req Request) func([]byte) {
	anyBytes := func([]byte) { req.Activity(v1alpha1.ActivityWebSocket) }
	if !strings.EqualFold(protocol, "websocket") {
		return anyBytes
	}
	rules := req.Rules
	frames := &wsframe.Reader{PrefixLen: rules.PrefixLen(), OnMessage: func(m wsframe.Message) {
		if rules.MessageCounts(m) {
			req.Activity(v1alpha1.ActivityWebSocket)
		}
	}}
	return func(b []byte) {
		if frames.Feed(b) != nil {
			anyBytes(b)
		}
	}
}

// withoutDeflate removes permessage-deflate from the extensions a client
// offers, keeping any others.
func withoutDeflate(h http.Header) {
	var keep []string
	for _, v := range h.Values("Sec-WebSocket-Extensions") {
		for _, ext := range strings.Split(v, ",") {
			ext = strings.TrimSpace(ext)
			name, _, _ := strings.Cut(ext, ";")
			if ext != "" && !strings.EqualFold(strings.TrimSpace(name), "permessage-deflate") {
				keep = append(keep, ext)
			}
		}
	}
	h.Del("Sec-WebSocket-Extensions")
	if len(keep) > 0 {
		h.Set("Sec-WebSocket-Extensions", strings.Join(keep, ", "))
	}
}

// tunnel joins two connections until either side closes or fails; then
// both are closed, as httputil.ReverseProxy does.
type tunnel struct {
	a, b net.Conn
	done func()
	once sync.Once
	// server follows the environment's WebSocket frames (nil for other
	// protocols), so a shutdown can close at a frame boundary; closing
	// says one is under way. Both belong to the environment-to-client
	// pump, except closing, which CloseWebSockets sets.
	server    *wsframe.Reader
	closing   atomic.Bool
	graceUsed bool
	ended     chan struct{}
	untrack   func()
}

// abandon undoes the tracking of a tunnel whose switch failed before it
// ran (the caller closes the connections and reports the request's end),
// so that a shutdown does not wait for it.
func (t *tunnel) abandon(err error) error {
	if t.untrack != nil {
		t.untrack()
	}
	close(t.ended)
	return err
}

func (t *tunnel) close() {
	t.once.Do(func() {
		_ = t.a.Close()
		_ = t.b.Close()
		if t.untrack != nil {
			t.untrack()
		}
		if t.done != nil {
			t.done()
		}
		close(t.ended)
	})
}

// copyBuffers lend a buffer to a tunnel direction while bytes move.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyBuffered is the portable copy loop, which keeps its buffer while it
// waits for the next read.
func (t *tunnel) copyBuffered(src, dst net.Conn, observe func([]byte), fromServer bool) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	for {
		n, err := src.Read(*buf)
		if n > 0 {
			if observe != nil {
				observe((*buf)[:n])
			}
			if _, werr := dst.Write((*buf)[:n]); werr != nil {
				return
			}
			if fromServer && t.closing.Load() && t.shutdownStep(nil) {
				return
			}
		}
		if err != nil && (!fromServer || t.shutdownStep(err)) {
			return
		}
	}
}
