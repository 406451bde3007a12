package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"

	"github.com/userland-dev/userland/internal/gateway/pages"
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
	// BodyReadTimeout bounds how long a request's body may take to arrive
	// until the gateway passes the request to an environment: anonymous
	// and refused requests, whose body the server drains before it
	// answers, included. 0: formReadTimeout.
	BodyReadTimeout time.Duration
}

// boundBody gives a request with a body a read deadline from its start. An
// environment's request is refused (not signed in, not allowed, too many)
// without its body being read, and the HTTP server then drains up to 256
// KiB of it before it answers, to keep the connection: with no deadline, a
// client trickling a large Content-Length would hold that connection and
// its goroutine for as long as it liked. The deadline is lifted
// (unboundBody) only once the request is passed to an environment, whose
// uploads may legitimately take long.
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		// No body to trickle. (And no deadline: with no body left to read
		// the server's background read, which would see the deadline pass,
		// watches for the client going away and would cancel the request.)
		return
	}
	timeout := s.Limits.BodyReadTimeout
	if timeout <= 0 {
		timeout = formReadTimeout
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
}

// unboundBody lifts boundBody's deadline from a request the gateway is
// passing to an environment.
func unboundBody(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
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
func formError(w http.ResponseWriter, r *http.Request, err error) {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		pages.Error(w, r, http.StatusRequestEntityTooLarge, "form too large")
		return
	}
	pages.Error(w, r, http.StatusBadRequest, "could not read the form")
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

// Static sign-in throttles. An account takes a few attempts at once, then
// one every accountEvery: guessing one password is slow, and a flood
// against one account is turned away before bcrypt, so it cannot fill the
// password-check gate the other accounts need. A client (an address) may
// fail more, since a classroom may share one address; only its failures
// count.
const (
	accountBurst = 5
	accountEvery = 12 * time.Second
	clientBurst  = 30
	clientEvery  = 2 * time.Second
	// throttleKeys bounds each throttle's memory: the least recently
	// used limiter goes first, so made-up user names cannot grow it.
	throttleKeys = 10000
)

// throttle keeps one token bucket per key, in a bounded LRU.
type throttle struct {
	every time.Duration
	burst int

	mu       sync.Mutex
	limiters *lru.Cache
}

func newThrottle(every time.Duration, burst int) *throttle {
	return &throttle{every: every, burst: burst, limiters: lru.New(throttleKeys)}
}

// limiter returns key's bucket, made full on first use.
func (t *throttle) limiter(key string) *rate.Limiter {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.limiters.Get(key); ok {
		return l.(*rate.Limiter)
	}
	l := rate.NewLimiter(rate.Every(t.every), t.burst)
	t.limiters.Add(key, l)
	return l
}

// take spends one attempt of key's and returns what gives it back, or
// says how long until one is free. Taken before the attempt, so a flood
// of concurrent attempts gets no more than the burst through.
func (t *throttle) take(key string, now time.Time) (refund func(), wait time.Duration) {
	r := t.limiter(key).ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return nil, d
	}
	// Cancelled as of the moment it was taken, the token is given back
	// (less what others took since, which CancelAt accounts for).
	return func() { r.CancelAt(now) }, 0
}

// wait says how long until key may try again, without spending anything.
func (t *throttle) wait(key string, now time.Time) time.Duration {
	tokens := t.limiter(key).TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) * float64(t.every))
}

// spend records one failure of key's; failures past the burst are debt,
// so a client that keeps failing waits longer.
func (t *throttle) spend(key string, now time.Time) {
	t.limiter(key).ReserveN(now, 1)
}

// signinThrottles are the static sign-in's per-account and per-client
// buckets, made on first use.
type signinThrottles struct {
	once            sync.Once
	account, client *throttle
}

func (s *signinThrottles) get() (*throttle, *throttle) {
	s.once.Do(func() {
		s.account = newThrottle(accountEvery, accountBurst)
		s.client = newThrottle(clientEvery, clientBurst)
	})
	return s.account, s.client
}

// accountKey is the throttle's key for a user name as typed: long names
// are hashed, so a throttle entry costs the same whatever was posted.
func accountKey(name string) string {
	if len(name) <= 64 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}

// clientAddr is the address a sign-in came from: the connection's, or,
// when that is a trusted proxy's, the nearest address in X-Forwarded-For
// that is not one (the left-hand entries are the client's to write). An
// IPv6 client is its /64: one host usually holds a whole /64, and keyed by
// address it would get a fresh sign-in budget per address.
func clientAddr(r *http.Request, trusted []netip.Prefix) string {
	addr, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	ip := addr.Addr().Unmap()
	if !inPrefixes(ip, trusted) {
		return clientKey(ip)
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		parts := strings.Split(hops[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				return clientKey(ip)
			}
			if hop = hop.Unmap(); !inPrefixes(hop, trusted) {
				return clientKey(hop)
			}
		}
	}
	return clientKey(ip)
}

// clientKey is the throttle key of ip: itself for IPv4, its /64 for IPv6.
func clientKey(ip netip.Addr) string {
	if ip.Is4() {
		return ip.String()
	}
	p, err := ip.Prefix(64)
	if err != nil {
		return ip.String()
	}
	return p.String()
}

func inPrefixes(ip netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// retryAfter is a Retry-After value: whole seconds, at least one.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}
