package activity

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// The write-rate logic is pure bookkeeping; a fake client stands in for the
// API server here (the gateway tests exercise the real one).
func TestFlushWritesAtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	c := fakeClient(t, nil)
	now := time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)
	r := &Recorder{Client: c, Interval: time.Minute, Now: func() time.Time { return now }}
	key := types.NamespacedName{Namespace: "cs101", Name: "taro"}
	ctx := context.Background()

	r.Flush(ctx)
	if !stored(t, c).IsZero() {
		t.Fatal("activity written without any")
	}
	r.Touch(key, taroUID, v1alpha1.ActivityWebSocket)
	r.Flush(ctx)
	if got := stored(t, c); !got.Equal(now) {
		t.Fatalf("first activity stored as %v, want %v", got, now)
	}
	first := now
	now = now.Add(30 * time.Second)
	r.Touch(key, taroUID, v1alpha1.ActivityWebSocket)
	r.Flush(ctx)
	if got := stored(t, c); !got.Equal(first) {
		t.Fatalf("activity written again after 30s (%v); the interval is a minute", got)
	}
	now = now.Add(31 * time.Second)
	r.Touch(key, taroUID, v1alpha1.ActivityWebSocket)
	r.Flush(ctx)
	if got := stored(t, c); !got.Equal(now) {
		t.Fatalf("activity after the interval stored as %v, want %v", got, now)
	}
	// What kind of use it was is stored with it.
	now = now.Add(2 * time.Minute)
	if err := r.KeepRunning(ctx, key, taroUID); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.Userland
	if err := c.Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.LastActivitySource != v1alpha1.ActivityKeepRunning || !got.Status.LastActivityTime.Time.Equal(now) {
		t.Errorf("after KeepRunning: %s at %v, want KeepRunning at %v", got.Status.LastActivitySource, got.Status.LastActivityTime, now)
	}
}

// Activity that cannot be written (the API server is down) is kept and
// written by a later flush, not lost.
func TestFlushKeepsWhatItCouldNotWrite(t *testing.T) {
	t.Parallel()
	down := true
	c := fakeClient(t, func() error {
		if down {
			return errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		}
		return nil
	})
	now := time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)
	r := &Recorder{Client: c, Interval: time.Minute, Now: func() time.Time { return now }}
	key := types.NamespacedName{Namespace: "cs101", Name: "taro"}
	ctx := context.Background()
	r.Touch(key, taroUID, v1alpha1.ActivityWebSocket)
	used := now
	r.Flush(ctx) // fails
	now = now.Add(10 * time.Second)
	r.Flush(ctx) // fails again
	down = false
	now = now.Add(20 * time.Second)
	r.Flush(ctx)
	var got v1alpha1.Userland
	if err := c.Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.LastActivityTime == nil || !got.Status.LastActivityTime.Time.Equal(used) {
		t.Errorf("after the outage: last activity %v, want the use during it (%v)", got.Status.LastActivityTime, used)
	}
}

// Use that comes within the interval after a write is written once the
// interval has passed, even if nothing follows it: the last minute of
// someone's work is not lost, and the idle stop is not brought forward by it.
// Before the fix, Flush compared the use's time with the last write, not the
// clock, so this use stayed pending for ever.
func TestFlushWritesTheLastUseAfterTheInterval(t *testing.T) {
	t.Parallel()
	writes := 0
	c := fakeClient(t, func() error {
		writes++
		return nil
	})
	start := time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)
	now := start
	r := &Recorder{Client: c, Interval: time.Minute, Now: func() time.Time { return now }}
	key := types.NamespacedName{Namespace: "cs101", Name: "taro"}
	ctx := context.Background()

	r.Touch(key, taroUID, v1alpha1.ActivityWebSocket)
	r.Flush(ctx) // written: 09:00:00
	now = start.Add(30 * time.Second)
	r.Touch(key, taroUID, v1alpha1.ActivityWebSocket) // the last keystroke, 09:00:30
	lastUse := now
	for _, step := range []time.Duration{45 * time.Second, 59 * time.Second} {
		now = start.Add(step)
		r.Flush(ctx)
		if got := stored(t, c); !got.Equal(start) {
			t.Fatalf("at +%v: stored %v, want %v (no second write within the interval)", step, got, start)
		}
	}
	now = start.Add(time.Minute)
	r.Flush(ctx)
	if got := stored(t, c); !got.Equal(lastUse) {
		t.Fatalf("a minute after the first write: stored %v, want the last use %v", got, lastUse)
	}
	// Nothing more is used: later flushes write nothing.
	for i := range 10 {
		now = start.Add(time.Duration(2+i) * time.Minute)
		r.Flush(ctx)
	}
	if writes != 2 {
		t.Errorf("%d writes, want 2 (the first use, then the last)", writes)
	}
	t.Logf("writes: %d; stored last use %v", writes, stored(t, c))
}

// fakeClient holds the Userland cs101/taro, Ready. before, when set, runs ahead of
// every status patch; its error fails the patch (an API server down).
func fakeClient(t *testing.T, before func() error) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: "cs101", Name: "taro", UID: taroUID}}
	// Activity is only ever recorded for an environment the controller
	// has given a status (Ready, or Stopped for a wake).
	ul.Status.Phase = v1alpha1.PhaseReady
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ul).WithStatusSubresource(ul)
	if before != nil {
		b = b.WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := before(); err != nil {
				return err
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}})
	}
	return b.Build()
}

// stored is cs101/taro's stored last activity; zero when none.
func stored(t *testing.T, c client.Client) time.Time {
	t.Helper()
	var got v1alpha1.Userland
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "cs101", Name: "taro"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.LastActivityTime == nil {
		return time.Time{}
	}
	return got.Status.LastActivityTime.UTC()
}

// taroUID is the fake cs101/taro's UID.
const taroUID types.UID = "4c1e2f0a-taro"

// TestUseOfANamesakeDoesNotReplaceTheOwners: use still arriving for a
// Userland deleted and made again under its name (a tunnel to the old
// pod, outliving it for its grace period) is refused by the API server;
// it must not take the place of the new Userland's own use, or that use
// is lost and its idle stop comes early.
func TestUseOfANamesakeDoesNotReplaceTheOwners(t *testing.T) {
	t.Parallel()
	c := fakeClient(t, nil)
	now := time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)
	r := &Recorder{Client: c, Interval: time.Minute, Now: func() time.Time { return now }}
	key := types.NamespacedName{Namespace: "cs101", Name: "taro"}
	r.Touch(key, taroUID, v1alpha1.ActivityWebSocket)
	owners := now
	now = now.Add(time.Second)
	r.Touch(key, "an-earlier-taro", v1alpha1.ActivityWebSocket)
	r.Flush(context.Background())
	if got := stored(t, c); !got.Equal(owners) {
		t.Fatalf("stored %v, want the owner's use at %v", got, owners)
	}
}
