package gateway

import (
	"context"
	"errors"
	"net/http"
	"runtime"
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
	// PasswordChecks caps static sign-in password checks running at once
	// (bcrypt is slow on purpose, so anonymous posts could otherwise take
	// every core from proxying); 0: half the CPUs, at least one.
	PasswordChecks int
	// PasswordCheckWait is how long a sign-in waits for a free check
	// before a 429; 0: formReadTimeout.
	PasswordCheckWait time.Duration
}

// gate bounds how many of something run at once, across all clients.
type gate struct {
	once  sync.Once
	slots chan struct{}
}

// enter takes a slot, waiting up to wait; n sizes the gate on first use.
// It returns the function that gives the slot back, or nil if none came
// free in time.
func (g *gate) enter(ctx context.Context, n int, wait time.Duration) func() {
	g.once.Do(func() {
		if n <= 0 {
			n = max(1, runtime.GOMAXPROCS(0)/2)
		}
		g.slots = make(chan struct{}, n)
	})
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return func() { <-g.slots }
	case <-t.C:
		return nil
	case <-ctx.Done():
		return nil
	}
}

// formError answers a form the gateway could not read: too large (413)
// or cut off, malformed or too slow (400). Nothing else is done with it.
func formError(w http.ResponseWriter, err error) {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		http.Error(w, "form too large", http.StatusRequestEntityTooLarge)
		return
	}
	http.Error(w, "could not read the form", http.StatusBadRequest)
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
