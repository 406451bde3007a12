// Package activity records when environments are used and writes it to
// status.lastActivityTime, off the request path and at most once per
// interval per environment, so a busy gateway costs the API server little.
package activity

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// Recorder collects activity in memory and flushes it periodically.
type Recorder struct {
	// Client patches userlands/status.
	Client client.Client
	// Interval is the most often one environment's activity is written
	// (one minute by default).
	Interval time.Duration
	// Now is the clock; time.Now by default.
	Now func() time.Time

	mu sync.Mutex
	// pending is keyed by Userland, name and UID: use of one deleted
	// and made again under its name must not replace the new one's.
	pending map[pendingKey]use
	// written is when (by the clock, not the use's own time) each
	// environment's activity was last written, kept only while that is
	// within Interval: older entries allow a write anyway.
	written map[types.NamespacedName]time.Time
}

// use is one recorded use: when, what kind, and of which Userland by UID.
type use struct {
	at     time.Time
	source v1alpha1.ActivitySource
	// uid is the Userland the use was authorised for: the write is made
	// only while the name still holds it, so that use of one deleted
	// and made again under its name (another user's) neither wakes nor
	// keeps running the new one.
	uid types.UID
}

func (r *Recorder) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Recorder) interval() time.Duration {
	if r.Interval > 0 {
		return r.Interval
	}
	return time.Minute
}

// Touch notes use of the Userland key with the given UID. It is cheap:
// called on every request and WebSocket message that counts.
func (r *Recorder) Touch(key types.NamespacedName, uid types.UID, source v1alpha1.ActivitySource) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = map[pendingKey]use{}
	}
	r.pending[pendingKey{key, uid}] = use{at: now, source: source, uid: uid}
}

// Wake writes activity for the Userland key with the given UID now: a
// stopped environment is started by the controller when it sees activity
// newer than the stop.
func (r *Recorder) Wake(ctx context.Context, key types.NamespacedName, uid types.UID) error {
	return r.write(ctx, key, use{at: r.now(), source: v1alpha1.ActivityRequest, uid: uid})
}

// KeepRunning writes activity now for a user who answered an idle
// warning: it moves the idle stop a full timeout away.
func (r *Recorder) KeepRunning(ctx context.Context, key types.NamespacedName, uid types.UID) error {
	return r.write(ctx, key, use{at: r.now(), source: v1alpha1.ActivityKeepRunning, uid: uid})
}

// Flush writes each pending use whose environment's last write is at least
// Interval ago by the clock. A use that came soon after a write waits for the
// interval to pass and is then written, so the last use before someone stops
// working is never lost, and an idle stop is never earlier than the use
// allows. An environment nobody uses has nothing pending and costs no write.
func (r *Recorder) Flush(ctx context.Context) {
	now := r.now()
	r.mu.Lock()
	due := map[pendingKey]use{}
	for key, last := range r.written {
		if now.Sub(last) >= r.interval() {
			delete(r.written, key) // a write is allowed again; keep the map small
		}
	}
	for key, u := range r.pending {
		if _, recent := r.written[key.NamespacedName]; recent {
			continue
		}
		due[key] = u
		delete(r.pending, key)
	}
	r.mu.Unlock()
	for key, u := range due {
		if err := r.write(ctx, key.NamespacedName, u); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "recording activity; kept for the next flush", "userland", key.NamespacedName)
			r.keep(key, u)
		}
	}
}

// pendingKey is one Userland: its name, and which Userland of that name.
type pendingKey struct {
	types.NamespacedName
	uid types.UID
}

// keep puts back a use that could not be written (the API server down, say),
// unless a newer one arrived meanwhile, so the next flush writes it: an
// outage must not make a person's work look idle.
func (r *Recorder) keep(key pendingKey, u use) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.pending[key]; !ok || cur.at.Before(u.at) {
		r.pending[key] = u
	}
}

func (r *Recorder) write(ctx context.Context, key types.NamespacedName, u use) error {
	// A JSON patch of just these fields: it never conflicts with the
	// controller's status writes, and needs no prior read. Its first
	// operation tests the UID, so that it is refused when the name now
	// holds another Userland: a merge patch's metadata.uid would not do,
	// since the status subresource ignores metadata.
	stamp := metav1.NewTime(u.at).UTC().Format(time.RFC3339)
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": u.uid},
		{"op": "add", "path": "/status/lastActivityTime", "value": stamp},
		{"op": "add", "path": "/status/lastActivitySource", "value": u.source},
	})
	if err != nil {
		return fmt.Errorf("activity patch of %s: %w", key, err)
	}
	ul := &v1alpha1.Userland{}
	ul.Namespace, ul.Name = key.Namespace, key.Name
	if err := r.Client.Status().Patch(ctx, ul, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		if r.heldByAnother(ctx, key, u.uid) {
			// Deleted meanwhile, or deleted and made again (for someone
			// else, perhaps): the use was of a Userland that is gone.
			// Asked of the cache, not read from the error: a 404 while
			// the resource is briefly not served (its CRD updated) must
			// not drop a use.
			return nil
		}
		return fmt.Errorf("patching activity of %s: %w", key, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.written == nil {
		r.written = map[types.NamespacedName]time.Time{}
	}
	r.written[key] = r.now()
	return nil
}

// heldByAnother says whether key is now gone or another Userland than
// uid, by the client's reads (the gateway's cache): a refused patch is
// then not retried. A cache that has not seen the change yet says no, and
// the use is kept and tried again at the next flush.
func (r *Recorder) heldByAnother(ctx context.Context, key types.NamespacedName, uid types.UID) bool {
	var ul v1alpha1.Userland
	err := r.Client.Get(ctx, key, &ul)
	return apierrors.IsNotFound(err) || (err == nil && ul.UID != uid)
}

// Start flushes every few seconds until ctx ends; a manager Runnable.
func (r *Recorder) Start(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			r.Flush(context.Background())
			return nil
		case <-tick.C:
			r.Flush(ctx)
		}
	}
}
