package gateway

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Limits bound what one user, or anyone before signing in, can make a
// replica hold.
type Limits struct {
	// WebSocketsPerUser caps a user's open upgraded connections; 0: no cap.
	WebSocketsPerUser int
	// WaitingPerUser caps a user's requests held while environments
	// start; 0: no cap.
	WaitingPerUser int
}

// Body and read bounds of the main host's own endpoints (sign-in forms,
// dashboard actions): small forms, read within a deadline, so a slow or
// endless body holds neither memory nor a connection for long.
const (
	maxFormBytes    = 64 << 10
	formReadTimeout = 20 * time.Second
)

// counter counts what each user holds.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire takes one for user unless that would exceed max (0: no cap);
// release gives it back.
func (c *counter) acquire(user string, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if limit > 0 && c.n[user] >= limit {
		return false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[user]++
	return true
}

func (c *counter) release(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[user]--; c.n[user] <= 0 {
		delete(c.n, user)
	}
}

// tooMany refuses a request over a cap, saying when to retry.
func tooMany(w http.ResponseWriter, what string, retry time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(retry.Seconds())))
	http.Error(w, "too many "+what+" open for this user; close some and retry", http.StatusTooManyRequests)
}

// limitForm bounds a main-host request's body and the time to read it.
func limitForm(w http.ResponseWriter, r *http.Request, limit int64) {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(formReadTimeout))
}
