package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/idle"
)

// chattyApp is a WebSocket app that talks on its own (a message every
// 20 ms, as a kernel's status or a keepalive would) and echoes what it
// receives. It records the extensions the client offered it.
func chattyApp(t *testing.T, offered *atomic.Value) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		offered.Store(r.Header.Get("Sec-WebSocket-Extensions"))
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionContextTakeover})
		if err != nil {
			return
		}
		defer func() { _ = c.CloseNow() }()
		ctx := r.Context()
		go func() {
			for ctx.Err() == nil {
				if c.Write(ctx, websocket.MessageText, []byte(`{"execution_state":"idle"}`)) != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		for {
			typ, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			if c.Write(ctx, typ, append([]byte("echo: "), data...)) != nil {
				return
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// vscodeRules is the VS Code sample's preset.
var vscodeRules = idle.Compile(&v1alpha1.IdleSpec{Activity: &v1alpha1.ActivitySpec{
	IgnorePaths: []string{"/stable-", "/_static/"},
	WebSocket:   &v1alpha1.WebSocketActivitySpec{MinMessageBytes: 14, IgnoreMessages: []string{`(?s)remoteextensionsenvironment.{1,4}ping`}},
}})

func TestOnlyMessagesTheBrowserSendsCount(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		rules       *idle.Rules
		wantDeflate bool
		// messages the browser sends, and whether each counts
		sends []string
		count []bool
	}{{
		name: "defaults", wantDeflate: true,
		sends: []string{"k", strings.Repeat("x", 40)},
		count: []bool{true, true},
	}, {
		name: "VS Code preset", rules: vscodeRules,
		sends: []string{
			"\x09" + strings.Repeat("\x00", 12), // keepalive: 13 bytes
			"\x01\x00\x00\x00\x07\x00\x00\x00\x06\x00\x00\x00\x30\x04\x06d\x06\x05\x01\x1bremoteextensionsenvironment\x01\x04ping\x00",
			"\x01\x00\x00\x00\x08\x00\x00\x00\x07\x00\x00\x00\x20\x04\x06d\x06\x09\x01\x0eremoteterminal\x01\x05input",
		},
		count: []bool{false, false, true},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			var offered atomic.Value
			var activity atomic.Int64
			gw := frontWithRules(t, chattyApp(t, &offered), func(*http.Request) string { return "/ws" }, &activity, tt.rules)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(gw.URL, "http")+"/u/cs101/taro/ws",
				&websocket.DialOptions{CompressionMode: websocket.CompressionContextTakeover})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.CloseNow() }()
			replies := make(chan string, 1024)
			go func() {
				for {
					_, data, err := c.Read(ctx)
					if err != nil {
						return
					}
					if s := string(data); strings.HasPrefix(s, "echo: ") {
						replies <- s
					}
				}
			}()
			if got := offered.Load().(string); strings.Contains(got, "permessage-deflate") != tt.wantDeflate {
				t.Errorf("the app was offered extensions %q; permessage-deflate wanted: %v", got, tt.wantDeflate)
			}
			// Opening the WebSocket is a request: it counts once.
			if got := activity.Load(); got != 1 {
				t.Fatalf("opening counted %d times, want 1", got)
			}
			// The app talks and the browser answers pings for 300 ms:
			// none of that is a person.
			for range 3 {
				if err := c.Ping(ctx); err != nil {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if got := activity.Load(); got != 1 {
				t.Fatalf("pings, pongs and the app's own messages counted: %d, want 1", got)
			}
			want := int64(1)
			for i, msg := range tt.sends {
				if err := c.Write(ctx, websocket.MessageBinary, []byte(msg)); err != nil {
					t.Fatal(err)
				}
				select {
				case <-replies: // through the gateway and back: it was observed
				case <-ctx.Done():
					t.Fatal("no echo")
				}
				if tt.count[i] {
					want++
				}
				if got := activity.Load(); got != want {
					t.Errorf("after message %d (%q): activity %d, want %d", i, msg, got, want)
				}
			}
		})
	}
}

func TestBackgroundReadsDoNotCount(t *testing.T) {
	t.Parallel()
	var activity atomic.Int64
	rules := idle.Compile(&v1alpha1.IdleSpec{Activity: &v1alpha1.ActivitySpec{IgnorePaths: []string{"/api/kernels"}}})
	gw := frontWithRules(t, echoServer(t), func(r *http.Request) string { return strings.TrimPrefix(r.URL.EscapedPath(), "/u/cs101/taro") }, &activity, rules)
	for _, tt := range []struct {
		method, path string
		want         int64
	}{
		{http.MethodGet, "/api/kernels", 0},
		{http.MethodGet, "/notebooks/a.ipynb", 1},
		{http.MethodPost, "/api/kernels", 2},
	} {
		req, _ := http.NewRequest(tt.method, gw.URL+"/u/cs101/taro"+tt.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got := activity.Load(); got != tt.want {
			t.Errorf("after %s %s: activity %d, want %d", tt.method, tt.path, got, tt.want)
		}
	}
}
