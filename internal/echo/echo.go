// Package echo is the one echo app: it answers with what it received, so
// the tests, the benchmarks and `userland dev`'s demo app all see exactly
// what the gateway sends an environment.
package echo

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// UserHeader is the identity header the gateway sets; the WebSocket
// greeting names its value.
const UserHeader = "X-Forwarded-User"

// Reply is what the app answers, as JSON, at any path but the ones below.
type Reply struct {
	Method string `json:"method"`
	// Path is the escaped path as received.
	Path string `json:"path"`
	// User is UserHeader's value.
	User string `json:"user"`
	// Cookie is the Cookie header as received.
	Cookie  string      `json:"cookie"`
	Headers http.Header `json:"headers"`
}

// Sizes of the fixed answers benchmarks load.
const (
	SmallSize = 64
	BigSize   = 1 << 20
)

var (
	small = []byte(strings.Repeat("x", SmallSize))
	big   = []byte(strings.Repeat("y", BigSize))
)

// Handler serves the echo app:
//   - /ws: a WebSocket that greets with "hello <user>", then sends every
//     message back prefixed with "echo: ", until the client closes it;
//   - /small and /big: SmallSize and BigSize bytes;
//   - anything else: a Reply.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", WebSocket)
	mux.HandleFunc("/small", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(small) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(big) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Reply{
			Method: r.Method, Path: r.URL.EscapedPath(), User: r.Header.Get(UserHeader),
			Cookie: r.Header.Get("Cookie"), Headers: r.Header,
		})
	})
	return mux
}

// WebSocket is the /ws endpoint alone.
func WebSocket(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer func() { _ = c.CloseNow() }()
	if err := c.Write(r.Context(), websocket.MessageText, []byte("hello "+r.Header.Get(UserHeader))); err != nil {
		return
	}
	for {
		kind, msg, err := c.Read(r.Context())
		if err != nil {
			return
		}
		if err := c.Write(r.Context(), kind, append([]byte("echo: "), msg...)); err != nil {
			return
		}
	}
}
