package testenv

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// Backend is one server behind a RoundRobin, counting what it served.
type Backend struct {
	Name    string
	Handler http.Handler
	Served  atomic.Int32
	// Stop ends the server, when the test needs to.
	Stop func()
}

// RoundRobin sends each request to the next backend, with no stickiness, as
// a Service in front of several gateway pods may.
type RoundRobin struct {
	mu       sync.Mutex
	backends []*Backend
	next     int
}

// Set replaces the backends.
func (b *RoundRobin) Set(backends ...*Backend) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = backends
}

// Backends returns the current backends.
func (b *RoundRobin) Backends() []*Backend {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.backends
}

func (b *RoundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	be := b.backends[b.next%len(b.backends)]
	b.next++
	b.mu.Unlock()
	be.Served.Add(1)
	be.Handler.ServeHTTP(w, r)
}
