package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/userland-dev/userland/internal/gateway/session"
)

// echo is a real upstream that reports what it received.
func echo(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = c.CloseNow() }()
		for {
			typ, data, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo:"), data...)); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"path": r.URL.EscapedPath(), "headers": r.Header})
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// front puts the proxy behind a real HTTP server, as the gateway does.
func front(t *testing.T, upstream *httptest.Server, path func(*http.Request) string, activity *atomic.Int64) *httptest.Server {
	t.Helper()
	p := New([]string{"X-Custom-User"})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.ServeHTTP(w, r, Request{
			Upstream: strings.TrimPrefix(upstream.URL, "http://"),
			Path:     path(r), Prefix: "/u/cs101/taro",
			Identity: session.Identity{User: "Taro.Yamada@uni.example.ac.jp", Email: "taro@uni.example.ac.jp", Groups: []string{"cs101", "students"}},
			Activity: func() { activity.Add(1) },
		})
	}))
	t.Cleanup(s.Close)
	return s
}

func TestIdentityHeadersAreReplacedAndTheSessionCookieIsDropped(t *testing.T) {
	var activity atomic.Int64
	gw := front(t, echo(t), func(r *http.Request) string { return strings.TrimPrefix(r.URL.EscapedPath(), "/u/cs101/taro") }, &activity)
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
	var got struct {
		Path    string
		Headers http.Header
	}
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
	var activity atomic.Int64
	gw := front(t, echo(t), func(*http.Request) string { return "/ws" }, &activity)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(gw.URL, "http")+"/u/cs101/taro/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.CloseNow() }()
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
		if string(data) != "echo:"+msg {
			t.Errorf("got %q", data)
		}
	}
	if activity.Load() <= before {
		t.Error("WebSocket frames were not counted as activity")
	}
}

func TestClusterDNS(t *testing.T) {
	got, _ := ClusterDNS{}.Resolve("cs101", "taro", 8080)
	if got != "taro.cs101.svc.cluster.local:8080" {
		t.Errorf("got %q", got)
	}
}

func TestLargeUploadsStreamThrough(t *testing.T) {
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
	up := echo(t)
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
