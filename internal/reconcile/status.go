package reconcile

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StatusPatcher writes the status of objects of one kind: once per
// reconcile, as a merge patch of the status subresource, and only when it
// changed. A merge patch carries only the fields that changed, so another
// writer's fields (the gateway's activity on a Userland) are never
// overwritten.
//
// It remembers the status it last wrote to each object and the
// resourceVersion the patch was computed from. A reconcile that starts
// before the informer has delivered that patch (a child's event often wins
// the race) sees the old status, computes the same new one and would send
// it again: at 100 Userlands created at once that was one in five written
// twice. While the cache still holds the version the patch was made over,
// the server already holds that status (the patch succeeded) and the
// patch's event is on its way, so the repeat is skipped; once the cache
// has moved past that version, the entry is dropped and the cache alone
// decides.
//
// O is the object's pointer type, S its status type.
type StatusPatcher[O client.Object, S any] struct {
	client client.Client
	kind   string
	status func(O) *S
	memo   memo[S]
}

// NewStatusPatcher returns a patcher of the status status(obj) of objects
// of kind (a lower-case word for errors, such as "userland").
func NewStatusPatcher[O client.Object, S any](c client.Client, kind string, status func(O) *S) *StatusPatcher[O, S] {
	return &StatusPatcher[O, S]{client: c, kind: kind, status: status}
}

// Patch writes after's status, computed over before (the object as the
// reconcile read it, from the cache), unless it equals before's or repeats
// a write the cache has not caught up with. An object deleted meanwhile is
// not an error.
func (p *StatusPatcher[O, S]) Patch(ctx context.Context, before, after O) error {
	if !p.memo.needsPatch(before, p.status(before), p.status(after)) {
		return nil
	}
	if err := p.client.Status().Patch(ctx, after, client.MergeFrom(before)); err != nil {
		if apierrors.IsNotFound(err) {
			p.Forget(client.ObjectKeyFromObject(before))
			return nil // deleted meanwhile
		}
		return fmt.Errorf("patching status of %s %s: %w", p.kind, name(before), err)
	}
	p.memo.wrote(before, p.status(after.DeepCopyObject().(O)))
	return nil
}

// Forget drops what is remembered of an object, when it is gone.
func (p *StatusPatcher[O, S]) Forget(key types.NamespacedName) {
	p.memo.forget(key)
}

// name is namespace/name, or the name of a cluster-scoped object.
func name(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// memo remembers, per object, the status last written and the
// resourceVersion the write was computed from.
type memo[S any] struct {
	mu      sync.Mutex
	written map[types.NamespacedName]writtenStatus[S]
}

type writtenStatus[S any] struct {
	over   string // resourceVersion the patch was computed from
	status *S     // a copy, which nothing else holds
}

// needsPatch reports whether status differs from the cached object's
// (cachedStatus) and is not a repeat of the last patch, which the cache
// has not caught up with yet.
func (m *memo[S]) needsPatch(cached client.Object, cachedStatus, status *S) bool {
	// The memo is consulted first even when nothing changed, so that an
	// entry the cache has caught up with is dropped on the next reconcile.
	repeat := m.alreadyWritten(cached, status)
	return !repeat && !equality.Semantic.DeepEqual(*cachedStatus, *status)
}

// alreadyWritten reports whether patching cached to status would repeat
// the last patch, which the cache has not caught up with yet. Entries the
// cache has moved past are forgotten, so the memo holds only writes still
// in flight.
func (m *memo[S]) alreadyWritten(cached client.Object, status *S) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := client.ObjectKeyFromObject(cached)
	w, ok := m.written[key]
	if !ok {
		return false
	}
	if w.over != cached.GetResourceVersion() {
		delete(m.written, key)
		return false
	}
	return sameStatus(w.status, status)
}

// wrote records a successful patch of cached to status, which the caller
// no longer changes.
func (m *memo[S]) wrote(cached client.Object, status *S) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.written == nil {
		m.written = map[types.NamespacedName]writtenStatus[S]{}
	}
	m.written[client.ObjectKeyFromObject(cached)] = writtenStatus[S]{over: cached.GetResourceVersion(), status: status}
}

// forget drops what is remembered of an object.
func (m *memo[S]) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.written, key)
}

// sameStatus compares statuses semantically, ignoring conditions'
// lastTransitionTime: a reconcile working from the stale status stamps the
// transitions it repeats with its own clock, a second or so later than the
// write it repeats, which holds the truer time.
func sameStatus[S any](a, b *S) bool {
	return ignoringTransitionTimes.DeepEqual(*a, *b)
}

// ignoringTransitionTimes is equality.Semantic, except that conditions are
// equal whatever their lastTransitionTime.
var ignoringTransitionTimes = func() conversion.Equalities {
	e := equality.Semantic.Copy()
	if err := e.AddFunc(func(a, b metav1.Condition) bool {
		return a.Type == b.Type && a.Status == b.Status && a.ObservedGeneration == b.ObservedGeneration &&
			a.Reason == b.Reason && a.Message == b.Message
	}); err != nil {
		panic(err)
	}
	return e
}()
