package reconcile

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Creations remembers children this process has just created and its
// informer cache may not show yet (the "expectations" of Kubernetes' own
// ReplicaSet controller). A reconcile that runs before the creation event
// arrives (a sibling child's event often wins the race) would otherwise
// create the child again: the API server answers 409 and the write is
// wasted, and a child shared by many objects (one NetworkPolicy per
// namespace and template) is created once per busy worker when a class
// starts.
//
// An entry lasts until the cache shows the object (Observed) or TTL has
// passed. Within TTL a child that was deleted before the cache ever saw it
// is not re-created: callers requeue after TTL so it is.
type Creations struct {
	// TTL bounds how long a creation is trusted without the cache showing
	// it.
	TTL time.Duration

	mu sync.Mutex
	at map[creationKey]time.Time
}

type creationKey struct {
	kind string
	key  types.NamespacedName
}

// Created records that this process created kind key at now.
func (c *Creations) Created(kind string, key types.NamespacedName, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil {
		c.at = map[creationKey]time.Time{}
	}
	// Entries nobody asks about again (the owner deleted) go here, so the
	// map holds only creations of the last TTL.
	for k, t := range c.at {
		if now.Sub(t) >= c.TTL {
			delete(c.at, k)
		}
	}
	c.at[creationKey{kind, key}] = now
}

// Pending says whether kind key was created here within TTL of now and not
// yet observed, and how long until that trust ends.
func (c *Creations) Pending(kind string, key types.NamespacedName, now time.Time) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.at[creationKey{kind, key}]
	if !ok {
		return 0, false
	}
	if left := at.Add(c.TTL).Sub(now); left > 0 {
		return left, true
	}
	delete(c.at, creationKey{kind, key})
	return 0, false
}

// Observed drops the entry for kind key: the cache shows the object.
func (c *Creations) Observed(kind string, key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.at, creationKey{kind, key})
}

// Len is the number of creations not yet observed (for tests and metrics).
func (c *Creations) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.at)
}
