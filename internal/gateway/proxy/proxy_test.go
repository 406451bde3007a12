package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/echo"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/idle"
	"github.com/userland-dev/userland/internal/simcluster"
)

// echoServer is the echo app as an upstream.
func echoServer(t testing.TB) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(echo.Handler())
	t.Cleanup(s.Close)
	return s
}

// front puts the proxy behind a real HTTP server, as the gateway does.
func front(t testing.TB, upstream *httptest.Server, path func(*http.Request) string, activity *atomic.Int64) *httptest.Server {
	t.Helper()
	return frontWithRules(t, upstream, path, activity, nil)
}

// frontWithRules is front applying a template's activity rules.
func frontWithRules(t testing.TB, upstream *httptest.Server, path func(*http.Request) string, activity *atomic.Int64, rules *idle.Rules) *httptest.Server {
	t.Helper()
	p := New([]string{"X-Custom-User"})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.ServeHTTP(w, r, Request{
			Upstream: strings.TrimPrefix(upstream.URL, "http://"),
			Path:     path(r), Prefix: "/u/cs101/taro",
			Identity: session.Identity{User: "Taro.Yamada@uni.example.ac.jp", Email: "taro@uni.example.ac.jp", Groups: []string{"cs101", "students"}},
			Activity: func(v1alpha1.ActivitySource) { activity.Add(1) },
			Rules:    rules,
		})
	}))
	t.Cleanup(s.Close)
	return s
}

func TestIdentityHeadersAreReplacedAndTheSessionCookieIsDropped(t *testing.T) {
	t.Parallel()
	var activity atomic.Int64
	gw := front(t, echoServer(t), func(r *http.Request) string { return strings.TrimPrefix(r.URL.EscapedPath(), "/u/cs101/taro") }, &activity)
	req, _ := http.NewRequest(http.MethodGet, gw.URL+"/u/cs101/taro/lab/a%2Fb", nil)
	req.Header.Set("X-Forwarded-User", "admin")
	req.Header.Set("X-Forwarded-Groups", "platform-admins")
	req.Header.Set("X-Custom-User", "admin")
	req.Header.Set("Remote-User", "admin")
	req.Header.Set("Cookie", session.CookieName+"=secret; app_cookie=kept")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var got echo.Reply
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Path != "/lab/a%2Fb" {
		t.Errorf("upstream path %q, want the escaped rest /lab/a%%2Fb", got.Path)
	}
	want := map[string][]string{
		"X-Forwarded-User":   {"Taro.Yamada@uni.example.ac.jp"},
		"X-Forwarded-Email":  {"taro@uni.example.ac.jp"},
		"X-Forwarded-Groups": {"cs101,students"},
		"X-Forwarded-Prefix": {"/u/cs101/taro"},
		"Cookie":             {"app_cookie=kept"},
		"X-Custom-User":      nil,
		"Remote-User":        nil,
	}
	for h, v := range want {
		if diff := cmp.Diff(v, got.Headers.Values(h)); diff != "" {
			t.Errorf("upstream header %s (-want +got):\n%s", h, diff)
		}
	}
	if activity.Load() == 0 {
		t.Error("a request was not recorded as activity")
	}
}

func TestStreamingResponsesAreNotBuffered(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprint(w, "data: 0\n\n")
		http.NewResponseController(w).Flush()
		// The rest waits until the client has seen the first event: a
		// buffering proxy would never deliver it.
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = fmt.Fprint(w, "data: 1\n\ndata: 2\n\n")
	}))
	t.Cleanup(up.Close)
	var activity atomic.Int64
	gw := front(t, up, func(*http.Request) string { return "/sse" }, &activity)
	resp, err := http.Get(gw.URL + "/u/cs101/taro/sse")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	first := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		n, _ := resp.Body.Read(buf)
		first <- string(buf[:n])
	}()
	select {
	case got := <-first:
		if !strings.Contains(got, "data: 0") {
			t.Fatalf("first event: %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first event never arrived while the upstream held the rest: the response is buffered")
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(rest), "data: 2") {
		t.Errorf("stream ended early: %q", rest)
	}
}

func TestWebSocketsAreProxiedAndCountAsActivity(t *testing.T) {
	t.Parallel()
	var activity atomic.Int64
	gw := front(t, echoServer(t), func(*http.Request) string { return "/ws" }, &activity)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(gw.URL, "http")+"/u/cs101/taro/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.CloseNow() }()
	if _, hello, err := c.Read(ctx); err != nil || string(hello) != "hello Taro.Yamada@uni.example.ac.jp" {
		t.Fatalf("greeting %q (%v): the identity header did not reach the upgraded request", hello, err)
	}
	before := activity.Load()
	for i := range 3 {
		msg := fmt.Sprintf("frame %d", i)
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != "echo: "+msg {
			t.Errorf("got %q", data)
		}
	}
	if activity.Load() <= before {
		t.Error("WebSocket frames were not counted as activity")
	}
}

func TestLargeUploadsStreamThrough(t *testing.T) {
	t.Parallel()
	var received atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		received.Store(n)
	}))
	t.Cleanup(up.Close)
	var activity atomic.Int64
	gw := front(t, up, func(*http.Request) string { return "/upload" }, &activity)
	const size = 64 << 20
	resp, err := http.Post(gw.URL+"/u/cs101/taro/upload", "application/octet-stream", io.LimitReader(zeros{}, size))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || received.Load() != size {
		t.Fatalf("upload: %s, upstream received %d of %d bytes", resp.Status, received.Load(), size)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestHTTP2ClientsAreServed(t *testing.T) {
	t.Parallel()
	up := echoServer(t)
	p := New(nil)
	gw := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.ServeHTTP(w, r, Request{Upstream: strings.TrimPrefix(up.URL, "http://"), Path: "/x", Identity: session.Identity{User: "alice"}})
	}))
	gw.EnableHTTP2 = true
	gw.StartTLS()
	t.Cleanup(gw.Close)
	resp, err := gw.Client().Get(gw.URL + "/u/cs101/alice/x")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"X-Forwarded-User":["alice"]`) {
		t.Fatalf("HTTP/%d %s %s", resp.ProtoMajor, resp.Status, body)
	}
}

// rawUpgrader switches to a made-up protocol, sends bytes right behind its
// 101 answer and echoes whatever arrives, so both sides' early bytes are
// visible. It records the identity header it was given.
func rawUpgrader(t *testing.T, user *atomic.Value) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user.Store(r.Header.Get(HeaderUser))
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "upgrade to echo only", http.StatusForbidden)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nserver-first;")
		_ = rw.Flush()
		buf := make([]byte, 1024)
		for {
			n, err := rw.Read(buf)
			if n > 0 {
				_, _ = rw.Write(append([]byte("echo:"), buf[:n]...))
				_ = rw.Flush()
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// upgradeFront is front with a Done callback.
func upgradeFront(t *testing.T, upstream *httptest.Server, activity *atomic.Int64, done chan<- struct{}) *httptest.Server {
	t.Helper()
	p := New(nil)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.ServeHTTP(w, r, Request{
			Upstream: strings.TrimPrefix(upstream.URL, "http://"), Path: "/raw",
			Identity: session.Identity{User: "taro"},
			Activity: func(v1alpha1.ActivitySource) { activity.Add(1) },
			Done:     func() { done <- struct{}{} },
		})
	}))
	t.Cleanup(s.Close)
	return s
}

func TestUpgradedConnectionsCarryEarlyBytesBothWaysAndReportTheirEnd(t *testing.T) {
	t.Parallel()
	var user atomic.Value
	var activity atomic.Int64
	done := make(chan struct{}, 1)
	gw := upgradeFront(t, rawUpgrader(t, &user), &activity, done)
	conn, err := net.Dial("tcp", strings.TrimPrefix(gw.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// The request and the first bytes of the new protocol in one write.
	if _, err := io.WriteString(conn, "GET /u/cs101/taro/raw HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: echo\r\nX-Forwarded-User: admin\r\n\r\nclient-first"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "echo" {
		t.Fatalf("handshake: %s, Upgrade %q", resp.Status, resp.Header.Get("Upgrade"))
	}
	want := "server-first;echo:client-first"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil {
		t.Fatalf("read %q: %v", got, err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("bytes through the tunnel (-want +got):\n%s", diff)
	}
	if got := user.Load(); got != "taro" {
		t.Errorf("the environment saw user %q, want the gateway's taro", got)
	}
	before := activity.Load()
	if _, err := io.WriteString(conn, "later"); err != nil {
		t.Fatal(err)
	}
	got = make([]byte, len("echo:later"))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "echo:later" {
		t.Fatalf("second exchange: %q, %v", got, err)
	}
	if activity.Load() <= before {
		t.Error("bytes through the tunnel were not counted as activity")
	}
	select {
	case <-done:
		t.Fatal("Done was reported while the tunnel was open")
	default:
	}
	_ = conn.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Done was never reported after the client closed")
	}
}

func TestUpgradesTheEnvironmentRefusesAreRelayed(t *testing.T) {
	t.Parallel()
	var user atomic.Value
	var activity atomic.Int64
	done := make(chan struct{}, 1)
	gw := upgradeFront(t, rawUpgrader(t, &user), &activity, done)
	req, _ := http.NewRequest(http.MethodGet, gw.URL+"/u/cs101/taro/raw", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "h2c")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "upgrade to echo only") {
		t.Errorf("got %s %q, want the environment's 403", resp.Status, body)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Done was never reported for a refused upgrade")
	}
}

func TestUpgradesToAnUnreachableEnvironmentGet502(t *testing.T) {
	t.Parallel()
	addr, err := simcluster.FreeAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	p := New(nil)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.ServeHTTP(w, r, Request{Upstream: addr, Path: "/ws", Identity: session.Identity{User: "taro"}})
	}))
	t.Cleanup(gw.Close)
	req, _ := http.NewRequest(http.MethodGet, gw.URL+"/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Retry-After") == "" {
		t.Errorf("got %s, Retry-After %q; want 502 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
}

// BenchmarkSmallResponses proxies small GETs in-process (client, proxy and
// upstream alike, so allocations are the three together); `make bench`
// measures the gateway as a process.
func BenchmarkSmallResponses(b *testing.B) {
	var activity atomic.Int64
	s := front(b, echoServer(b), func(*http.Request) string { return "/small" }, &activity)
	c := s.Client()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Get(s.URL + "/u/cs101/taro/small")
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}
