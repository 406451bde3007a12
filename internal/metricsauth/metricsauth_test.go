package metricsauth

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
)

func TestBearer(t *testing.T) {
	t.Parallel()
	type got struct {
		Token string
		OK    bool
	}
	for _, tc := range []struct {
		header string
		want   got
	}{
		{"Bearer abc", got{"abc", true}},
		{"bearer abc", got{"abc", true}},
		{"Bearer  abc ", got{"abc", true}},
		{"Bearer", got{"", false}},
		{"Bearer ", got{"", false}},
		{"Basic YWxpY2U6cHc=", got{"YWxpY2U6cHc=", false}},
		{"", got{"", false}},
	} {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		token, ok := bearer(r)
		if diff := cmp.Diff(tc.want, got{token, ok}); diff != "" {
			t.Errorf("bearer(%q) (-want +got):\n%s", tc.header, diff)
		}
	}
}

// TestCallersBeyondTheBoundWait: with every review slot taken, a caller
// gets 429 after waiting slotWait, and without a token 401 before any
// review: neither reaches the API server (the Guard has no client here,
// so a review would fail the test with 503). A caller allowed lately is
// served without a slot: a flood cannot crowd out the scraper.
func TestCallersBeyondTheBoundWait(t *testing.T) {
	t.Parallel()
	g := &Guard{slots: make(chan struct{}, 1)}
	g.slots <- struct{}{}
	served := false
	h := g.Wrap(logr.Discard(), http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))
	for _, tc := range []struct {
		header string
		want   int
	}{
		{"Bearer made-up", http.StatusTooManyRequests},
		{"", http.StatusUnauthorized},
	} {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("Authorization %q with the reviews full: %d, want %d", tc.header, w.Code, tc.want)
		}
	}
	if served {
		t.Error("a caller was served the metrics without a review")
	}
	g.remember(callerKey("prometheus", "/metrics"), time.Now())
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	r.Header.Set("Authorization", "Bearer prometheus")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if !served || w.Code != http.StatusOK {
		t.Errorf("a caller allowed lately, with the reviews full: %d (served %v), want 200", w.Code, served)
	}
	other := httptest.NewRequest(http.MethodGet, "/debug", nil)
	other.Header.Set("Authorization", "Bearer prometheus")
	served = false
	h.ServeHTTP(httptest.NewRecorder(), other)
	if served {
		t.Error("a caller allowed on /metrics was served another path without a review")
	}
}

// TestGuardUnderConcurrentCallers: callers served from the memory of
// allowed tokens while others are being remembered, all at once (run
// under the race detector by make test-race).
func TestGuardUnderConcurrentCallers(t *testing.T) {
	t.Parallel()
	g := &Guard{slots: make(chan struct{}, 1)}
	g.slots <- struct{}{} // no review may run: only remembered callers pass
	g.remember(callerKey("prometheus", "/metrics"), time.Now())
	var served atomic.Int32
	h := g.Wrap(logr.Discard(), http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) }))
	var wg sync.WaitGroup
	var wrong atomic.Int32
	for i := range 16 {
		wg.Go(func() {
			for n := range 10 { // 160 others: fewer than maxAllowed
				g.remember(callerKey(fmt.Sprintf("other-%d-%d", i, n), "/metrics"), time.Now())
				r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				r.Header.Set("Authorization", "Bearer prometheus")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					wrong.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if wrong.Load() != 0 || served.Load() != 16*10 {
		t.Errorf("%d of %d remembered callers were not served (%d served)", wrong.Load(), 16*10, served.Load())
	}
}
