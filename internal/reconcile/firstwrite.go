package reconcile

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// FirstStatusHold coalesces an object's first two status writes when they
// come close together: the first status of an object still in progress
// ("Starting") is held back for Window after the reconcile that first
// computed it, and written then only if the object has not settled. An
// object that settles within the window (an environment Ready in under a
// second) gets one status write instead of two.
//
// The price is that for up to Window a new object shows no status at all,
// rather than "in progress"; kstatus readers see no observedGeneration and
// treat it as in progress anyway.
//
// What is held lives in memory only: a controller that restarts within
// the window writes the first status it computes, as without the hold.
type FirstStatusHold struct {
	// Window is how long a first in-progress status waits; zero disables
	// holding.
	Window time.Duration

	mu    sync.Mutex
	since map[types.NamespacedName]time.Time
}

// Hold says whether the status of key should not be written now, and
// when to look again. neverWritten is whether the object has no status
// yet; inProgress whether the status computed now is one the object
// passes through on its way to settling. Only a never-written,
// in-progress status is held, and only until Window after it was first
// held.
func (h *FirstStatusHold) Hold(key types.NamespacedName, now time.Time, neverWritten, inProgress bool) (wait time.Duration, hold bool) {
	if h == nil || h.Window <= 0 {
		return 0, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !neverWritten || !inProgress {
		delete(h.since, key)
		return 0, false
	}
	first, ok := h.since[key]
	if !ok {
		if h.since == nil {
			h.since = map[types.NamespacedName]time.Time{}
		}
		h.since[key] = now
		first = now
	}
	if wait := first.Add(h.Window).Sub(now); wait > 0 {
		return wait, true
	}
	// Kept until a status is written: a failed write must not start
	// another window.
	return 0, false
}

// Forget drops what is held for key, when the object is gone.
func (h *FirstStatusHold) Forget(key types.NamespacedName) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.since, key)
}
