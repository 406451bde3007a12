package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// statusMemo remembers the status each Userland was last patched to and the
// resourceVersion the patch was computed from. A reconcile that starts
// before the informer has delivered that patch (a child's event often wins
// the race) sees the old status, computes the same new one and would send
// it again: at 100 environments created at once that was one Userland in
// five written twice. While the cache still holds the version the patch
// was made over, the patch's own event is on its way and will reconcile
// again, so the repeat can be skipped.
type statusMemo struct {
	mu      sync.Mutex
	written map[types.NamespacedName]writtenStatus
}

type writtenStatus struct {
	over   string // resourceVersion the patch was computed from
	status v1alpha1.UserlandStatus
}

// needsPatch reports whether status differs from the cached Userland's and
// is not a repeat of this process's last patch, which the cache has not
// caught up with yet.
func (m *statusMemo) needsPatch(cached *v1alpha1.Userland, status *v1alpha1.UserlandStatus) bool {
	// The memo is consulted first even when nothing changed, so that an
	// entry the cache has caught up with is dropped on the next reconcile.
	repeat := m.alreadyWritten(cached, status)
	return !repeat && !equality.Semantic.DeepEqual(cached.Status, *status)
}

// alreadyWritten reports whether patching cached to status would repeat
// this process's last patch, which the cache has not caught up with yet.
// Entries the cache has moved past are forgotten, so the memo holds only
// writes still in flight.
func (m *statusMemo) alreadyWritten(cached *v1alpha1.Userland, status *v1alpha1.UserlandStatus) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.written[client.ObjectKeyFromObject(cached)]
	if !ok {
		return false
	}
	if w.over != cached.ResourceVersion {
		delete(m.written, client.ObjectKeyFromObject(cached))
		return false
	}
	return sameStatus(&w.status, status)
}

// wrote records a successful patch of cached to status.
func (m *statusMemo) wrote(cached *v1alpha1.Userland, status *v1alpha1.UserlandStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.written == nil {
		m.written = map[types.NamespacedName]writtenStatus{}
	}
	m.written[client.ObjectKeyFromObject(cached)] = writtenStatus{over: cached.ResourceVersion, status: *status.DeepCopy()}
}

// forget drops what is remembered of a Userland, when it is gone.
func (m *statusMemo) forget(name types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.written, name)
}

// sameStatus compares statuses ignoring conditions' lastTransitionTime: a
// reconcile working from the stale status stamps the transitions it
// repeats with its own clock, a second or so later than the write it
// repeats, which holds the truer time.
func sameStatus(a, b *v1alpha1.UserlandStatus) bool {
	return equality.Semantic.DeepEqual(withoutTransitionTimes(a), withoutTransitionTimes(b))
}

func withoutTransitionTimes(s *v1alpha1.UserlandStatus) *v1alpha1.UserlandStatus {
	c := s.DeepCopy()
	for i := range c.Conditions {
		c.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	return c
}
