package actions

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
)

func adversaryTodayClient(t *testing.T, f interceptor.Funcs, objs ...client.Object) client.WithWatch {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(f).Build()
}

// adversaryTodayUserland is a client holding Userland ns/u (uid-1), and
// a copy read from it, as a page or a command holds one.
func adversaryTodayUserland(t *testing.T, f interceptor.Funcs) (client.WithWatch, *v1alpha1.Userland) {
	t.Helper()
	c := adversaryTodayClient(t, f, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "u", UID: "uid-1"}})
	var read v1alpha1.Userland
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "u"}, &read); err != nil {
		t.Fatal(err)
	}
	return c, &read
}

var adversaryTodayTmpl = &v1alpha1.TemplateSpec{Budget: &v1alpha1.BudgetSpec{Hours: 2, Period: v1alpha1.BudgetWeek}}

func adversaryTodayGranted(t *testing.T, c client.Client, name string, now time.Time) int64 {
	t.Helper()
	var ul v1alpha1.Userland
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &ul); err != nil {
		t.Fatal(err)
	}
	h, _ := budget.GrantFor(ul.Annotations[v1alpha1.AnnotationBudgetGrant], budget.WeekStart(now))
	return h
}

// TestAdversaryTodayGrantRetryIsBounded: a writer that answers every
// patch with a conflict (a controller writing status in a hot loop, or a
// hostile one) must not make Grant spin: it gives up after a few
// attempts, with the conflict, in well under a second or two.
func TestAdversaryTodayGrantRetryIsBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	patches := 0
	c, stored := adversaryTodayUserland(t, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
		patches++
		return apierrors.NewConflict(schema.GroupResource{Group: "userland.dev", Resource: "userlands"}, obj.GetName(), errors.New("moved"))
	}})
	start := time.Now()
	err := Grant(context.Background(), c, c, stored, nil, adversaryTodayTmpl, 2, "prof", now)
	if !apierrors.IsConflict(err) {
		t.Errorf("Grant under endless conflicts: %v, want the conflict", err)
	}
	if patches > 6 || time.Since(start) > 5*time.Second {
		t.Errorf("HOLE: Grant spun: %d patches in %s", patches, time.Since(start))
	}
}

// TestAdversaryTodayGrantNeverLosesNorLeaksAcrossObjects: with a stale
// copy (another granter's 3 hours landed since it was read), Grant adds
// on top of the live total rather than overwriting it; with a successor
// of the same name (deleted and made again, a new UID) it grants nothing.
func TestAdversaryTodayGrantNeverLosesNorLeaksAcrossObjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	c, stale := adversaryTodayUserland(t, interceptor.Funcs{})
	if err := Grant(ctx, c, c, stale.DeepCopy(), nil, adversaryTodayTmpl, 3, "ta", now); err != nil {
		t.Fatal(err)
	}
	if err := Grant(ctx, c, c, stale.DeepCopy(), nil, adversaryTodayTmpl, 2, "prof", now); err != nil {
		t.Fatalf("a grant from a stale copy: %v", err)
	}
	if got := adversaryTodayGranted(t, c, "u", now); got != 5 {
		t.Errorf("HOLE: after 3h and then 2h from a stale copy the grant is %dh, want 5h (one was lost)", got)
	}

	// A successor: the name now holds another object.
	if err := c.Delete(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "u", UID: "uid-2"}}); err != nil {
		t.Fatal(err)
	}
	err := Grant(ctx, c, c, stale.DeepCopy(), nil, adversaryTodayTmpl, 4, "prof", now)
	if !apierrors.IsNotFound(err) {
		t.Errorf("grant checked on the old object, written at its successor: %v, want NotFound", err)
	}
	if got := adversaryTodayGranted(t, c, "u", now); got != 0 {
		t.Errorf("HOLE: the successor of the same name was granted %dh", got)
	}
}

// TestAdversaryTodayGrantReplayAddsAgain documents a behaviour change: a
// form posted twice (a double click, a browser's resubmit) with the same
// cached copy used to meet a conflict on the second post (the cached
// resourceVersion had moved); Grant now re-reads and adds the hours
// again. Each press of Grant is meant to add, so this passes as the
// documented semantics; see the report.
func TestAdversaryTodayGrantReplayAddsAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	c, cached := adversaryTodayUserland(t, interceptor.Funcs{})
	for range 2 {
		if err := Grant(ctx, c, c, cached.DeepCopy(), nil, adversaryTodayTmpl, 5, "prof", now); err != nil {
			t.Fatal(err)
		}
	}
	if got := adversaryTodayGranted(t, c, "u", now); got != 10 {
		t.Errorf("two posts of 5h from one cached copy granted %dh", got)
	}
}

// TestGrantIfUnchangedCountsAFormOnce: the dashboard's forms send the
// grant their page showed; the same form posted twice (a double click)
// grants once, and the second post is told why.
func TestGrantIfUnchangedCountsAFormOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	c, cached := adversaryTodayUserland(t, interceptor.Funcs{})
	seen := cached.Annotations[v1alpha1.AnnotationBudgetGrant]
	if err := GrantIfUnchanged(ctx, c, c, cached.DeepCopy(), nil, adversaryTodayTmpl, 5, "prof", now, seen); err != nil {
		t.Fatal(err)
	}
	if err := GrantIfUnchanged(ctx, c, c, cached.DeepCopy(), nil, adversaryTodayTmpl, 5, "prof", now, seen); !errors.Is(err, ErrGrantChanged) {
		t.Errorf("the same form posted again: %v, want ErrGrantChanged", err)
	}
	if got := adversaryTodayGranted(t, c, "u", now); got != 5 {
		t.Errorf("one form posted twice granted %dh, want 5", got)
	}
}
