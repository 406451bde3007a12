package reconcile

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// The memo's cases, over Userland statuses: they were the controller's
// statusMemo tests, which the memo generalizes.
func TestStatusMemoSkipsOnlyARepeatTheCacheHasNotSeen(t *testing.T) {
	t.Parallel()
	at := func(sec int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 1, 0, 0, sec, 0, time.UTC)) }
	starting := func(transition metav1.Time) v1alpha1.UserlandStatus {
		return v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseStarting, Conditions: []metav1.Condition{{
			Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Starting", LastTransitionTime: transition,
		}}}
	}
	ready := v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseReady, Conditions: []metav1.Condition{{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: at(5),
	}}}
	userland := func(name, rv string) *v1alpha1.Userland {
		ul := &v1alpha1.Userland{}
		ul.Namespace, ul.Name, ul.ResourceVersion = "ns", name, rv
		return ul
	}

	tests := []struct {
		name      string
		remember  bool // whether "u" at resourceVersion 10 was patched to starting(at(1))
		forget    bool
		cached    *v1alpha1.Userland
		status    v1alpha1.UserlandStatus
		wantSkips []bool // alreadyWritten, asked twice
	}{
		{name: "nothing written", cached: userland("u", "10"), status: starting(at(1)), wantSkips: []bool{false, false}},
		{name: "same write over the same stale version", remember: true, cached: userland("u", "10"), status: starting(at(1)), wantSkips: []bool{true, true}},
		{name: "only the transition time differs", remember: true, cached: userland("u", "10"), status: starting(at(2)), wantSkips: []bool{true, true}},
		{name: "a different status", remember: true, cached: userland("u", "10"), status: ready, wantSkips: []bool{false, false}},
		// The cache moved on (our write arrived, or someone else wrote):
		// the memo is dropped and the write decided from the cache alone.
		{name: "cache moved past the write", remember: true, cached: userland("u", "11"), status: starting(at(1)), wantSkips: []bool{false, false}},
		{name: "another Userland", remember: true, cached: userland("v", "10"), status: starting(at(1)), wantSkips: []bool{false, false}},
		{name: "forgotten when deleted", remember: true, forget: true, cached: userland("u", "10"), status: starting(at(1)), wantSkips: []bool{false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m memo[v1alpha1.UserlandStatus]
			if tt.remember {
				s := starting(at(1))
				m.wrote(userland("u", "10"), &s)
			}
			if tt.forget {
				m.forget(client.ObjectKeyFromObject(userland("u", "")))
			}
			var got []bool
			for range tt.wantSkips {
				got = append(got, m.alreadyWritten(tt.cached, &tt.status))
			}
			if diff := cmp.Diff(tt.wantSkips, got); diff != "" {
				t.Errorf("alreadyWritten (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusMemoForgetsWhatTheCacheCaughtUpWith(t *testing.T) {
	t.Parallel()
	var m memo[v1alpha1.UserlandStatus]
	ul := &v1alpha1.Userland{}
	ul.Namespace, ul.Name, ul.ResourceVersion = "ns", "u", "10"
	s := v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseReady}
	m.wrote(ul, &s)
	if m.needsPatch(ul, &ul.Status, &s) {
		t.Errorf("needsPatch = true for a repeat of a write still in flight")
	}
	// The write arrives: the cache holds it at a newer version, and the
	// next reconcile computes the same status, so nothing is patched and
	// the entry must still go, or the memo keeps one per Userland forever.
	ul.ResourceVersion, ul.Status = "11", s
	if m.needsPatch(ul, &ul.Status, &s) {
		t.Errorf("needsPatch = true for a status the cache already holds")
	}
	if len(m.written) != 0 {
		t.Errorf("memo holds %d entries after the cache caught up, want 0", len(m.written))
	}
	if changed := (v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseStopped}); !m.needsPatch(ul, &ul.Status, &changed) {
		t.Errorf("needsPatch = false for a changed status with nothing in flight")
	}
}

// patcherFixture is a fake API server holding one Userland, and a patcher
// of Userland statuses that counts its writes.
type patcherFixture struct {
	client  client.Client
	patcher *StatusPatcher[*v1alpha1.Userland, v1alpha1.UserlandStatus]
	writes  int
	refuse  error
}

func newPatcherFixture(t *testing.T) *patcherFixture {
	t.Helper()
	f := &patcherFixture{}
	ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "u"}}
	f.client = fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).
		WithStatusSubresource(&v1alpha1.Userland{}).WithObjects(ul).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			f.writes++
			if f.refuse != nil {
				return f.refuse
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	f.patcher = NewStatusPatcher(f.client, "userland", func(ul *v1alpha1.Userland) *v1alpha1.UserlandStatus { return &ul.Status })
	return f
}

func (f *patcherFixture) get(t *testing.T) *v1alpha1.Userland {
	t.Helper()
	var ul v1alpha1.Userland
	if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "u"}, &ul); err != nil {
		t.Fatal(err)
	}
	return &ul
}

func TestStatusPatcher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	withPhase := func(ul *v1alpha1.Userland, p v1alpha1.Phase) *v1alpha1.Userland {
		ul = ul.DeepCopy()
		ul.Status.Phase = p
		return ul
	}

	t.Run("an unchanged status is not written", func(t *testing.T) {
		f := newPatcherFixture(t)
		before := f.get(t)
		if err := f.patcher.Patch(ctx, before, before.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		if f.writes != 0 {
			t.Errorf("%d writes, want 0", f.writes)
		}
	})

	t.Run("a change is merged into what another writer wrote meanwhile", func(t *testing.T) {
		f := newPatcherFixture(t)
		before := f.get(t)
		// The gateway records activity after the reconcile read the object.
		live := f.get(t)
		activity := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		live.Status.LastActivityTime = &activity
		if err := f.client.Status().Update(ctx, live); err != nil {
			t.Fatal(err)
		}
		if err := f.patcher.Patch(ctx, before, withPhase(before, v1alpha1.PhaseReady)); err != nil {
			t.Fatal(err)
		}
		got := f.get(t).Status
		want := v1alpha1.UserlandStatus{Phase: v1alpha1.PhaseReady, LastActivityTime: &activity}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("status (-want +got):\n%s", diff)
		}
	})

	t.Run("a repeat over the version the cache still holds is skipped", func(t *testing.T) {
		f := newPatcherFixture(t)
		before := f.get(t)
		for range 2 {
			if err := f.patcher.Patch(ctx, before, withPhase(before, v1alpha1.PhaseStarting)); err != nil {
				t.Fatal(err)
			}
		}
		if f.writes != 1 {
			t.Errorf("%d writes, want 1", f.writes)
		}
		// The cache catches up: the same status is already there.
		caught := f.get(t)
		if err := f.patcher.Patch(ctx, caught, withPhase(caught, v1alpha1.PhaseStarting)); err != nil {
			t.Fatal(err)
		}
		if f.writes != 1 || len(f.patcher.memo.written) != 0 {
			t.Errorf("%d writes and %d remembered after the cache caught up, want 1 and 0", f.writes, len(f.patcher.memo.written))
		}
	})

	t.Run("an object deleted meanwhile is no error, and is forgotten", func(t *testing.T) {
		f := newPatcherFixture(t)
		before := f.get(t)
		if err := f.patcher.Patch(ctx, before, withPhase(before, v1alpha1.PhaseStarting)); err != nil {
			t.Fatal(err)
		}
		if err := f.client.Delete(ctx, before); err != nil {
			t.Fatal(err)
		}
		if err := f.patcher.Patch(ctx, before, withPhase(before, v1alpha1.PhaseReady)); err != nil {
			t.Errorf("Patch of a deleted object = %v, want nil", err)
		}
		if n := len(f.patcher.memo.written); n != 0 {
			t.Errorf("%d remembered after the object went, want 0", n)
		}
	})

	t.Run("a refused write is an error naming the object, and is not remembered", func(t *testing.T) {
		f := newPatcherFixture(t)
		f.refuse = errors.New("the API server is away")
		before := f.get(t)
		err := f.patcher.Patch(ctx, before, withPhase(before, v1alpha1.PhaseReady))
		if !errors.Is(err, f.refuse) || err.Error() != "patching status of userland ns/u: the API server is away" {
			t.Errorf("Patch = %v, want the refusal, naming userland ns/u", err)
		}
		f.refuse = nil
		if err := f.patcher.Patch(ctx, before, withPhase(before, v1alpha1.PhaseReady)); err != nil || f.writes != 2 {
			t.Errorf("the retry: %v after %d writes, want written (2)", err, f.writes)
		}
	})
}
