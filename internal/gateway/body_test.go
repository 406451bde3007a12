package gateway_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/userland-dev/userland/internal/naming"
)

// trickle sends a request head announcing a large body, then the body a
// few bytes at a time, as a client holding connections open would, and
// returns how long the gateway kept the connection and what it answered.
func trickle(t *testing.T, addr, head string, giveUp time.Duration) (time.Duration, string, bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	start := time.Now()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	answered := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(conn) // until the gateway closes the connection
		answered <- string(b)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(giveUp)
	for {
		select {
		case answer := <-answered:
			return time.Since(start), answer, true
		case <-deadline:
			return time.Since(start), "", false
		case <-tick.C:
			_, _ = io.WriteString(conn, "xxxxxxxxxx") // fails once closed; the reader says so
		}
	}
}

// TestTrickledBodiesAreCutOff: a request's body, until the gateway passes
// the request to an environment, arrives within Limits.BodyReadTimeout or
// the connection is closed. Anonymous requests to environment hosts and
// paths are refused without their body being read, and the HTTP server
// drains such a body before answering: a client trickling a large
// Content-Length held the connection (and a goroutine) with no end.
// A signed-in upload, passed on to its environment, is not cut off.
func TestTrickledBodiesAreCutOff(t *testing.T) {
	const bound = time.Second
	h := setupHosts(t)
	h.server.Limits.BodyReadTimeout = bound
	addr := strings.TrimPrefix(h.gateway.URL, "http://")
	envHost := naming.HostLabel(h.ns, "alice") + ".apps.test"
	for _, tc := range []struct{ name, head string }{
		{"anonymous POST to an environment host",
			"POST /api/upload HTTP/1.1\r\nHost: " + envHost + "\r\nContent-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n"},
		{"anonymous POST to an environment path",
			"POST /u/" + h.ns + "/alice/api/upload HTTP/1.1\r\nHost: main.test\r\nContent-Length: 100000\r\n\r\n"},
		{"anonymous GET with a body to the main host",
			"GET / HTTP/1.1\r\nHost: main.test\r\nContent-Length: 100000\r\n\r\n"},
		{"anonymous chunked POST to an environment host",
			"POST / HTTP/1.1\r\nHost: " + envHost + "\r\nTransfer-Encoding: chunked\r\n\r\n1000\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			took, answer, closed := trickle(t, addr, tc.head, 10*bound)
			t.Logf("connection closed after %s (bound %s), answer %q", took.Round(time.Millisecond), bound, firstLine(answer))
			if !closed {
				t.Fatalf("still open after %s of trickling, want closed within %s", took.Round(time.Millisecond), bound)
			}
			// The drain stops at the deadline; closing waits up to half a
			// second more for the client to read the answer.
			if took > bound+2*time.Second {
				t.Errorf("closed after %s, want within %s", took, bound)
			}
		})
	}

	t.Run("signed-in upload slower than the bound", func(t *testing.T) {
		c := h.browser(t)
		h.signInThroughHandoff(t, c, "alice", "alice-pw", "alice")
		body, w := io.Pipe()
		go func() {
			for i := range 5 {
				_, _ = fmt.Fprintf(w, "part %d\n", i)
				time.Sleep(bound / 2)
			}
			_ = w.Close()
		}()
		before := upstreamPosts.Load()
		req, _ := http.NewRequest(http.MethodPost, h.envURL("alice")+"/upload", body)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || upstreamPosts.Load() != before+1 || !strings.Contains(string(got), "part 4") {
			t.Fatalf("a 2.5 s upload: %s %q, want it passed whole to the environment", resp.Status, got)
		}
	})
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}
