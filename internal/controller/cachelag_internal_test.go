package controller

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/reconcile"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestTemplateMissingOnlyFromTheCacheWritesNothing: a Userland created
// just after its template can be reconciled before the cache shows the
// template. The API server is asked before the user is told the template
// does not exist: when it has the template, no status is written (a new
// environment's first status is not spent on a false "missing") and the
// Userland is looked at again in a second. When the API server agrees
// that it is missing, the status says so at once.
//
// The cache and the API server are fakes here because a real cache's lag
// cannot be held open on demand; the real-apiserver tests cover the path
// where both agree.
func TestTemplateMissingOnlyFromTheCacheWritesNothing(t *testing.T) {
	t.Parallel()
	const ns = "class"
	tests := []struct {
		name         string
		apiServerHas bool
		wantRequeue  time.Duration
		wantPhase    v1alpha1.Phase
		wantWrites   int
	}{
		{name: "the cache lags the API server", apiServerHas: true, wantRequeue: cacheLagRecheck, wantPhase: "", wantWrites: 0},
		{name: "the template is missing", apiServerHas: false, wantRequeue: 0, wantPhase: v1alpha1.PhasePending, wantWrites: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme())
			if tt.apiServerHas {
				api = api.WithObjects(testobj.MakeTemplate(ns, "t").Container("web").Image("example.org/app:1").Obj())
			}
			r, statusWrites := newCacheMissReconciler(api.Build(), clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)))
			key := types.NamespacedName{Namespace: ns, Name: "ada"}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
			if err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			var got v1alpha1.Userland
			if err := r.Client.Get(context.Background(), key, &got); err != nil {
				t.Fatal(err)
			}
			type outcome struct {
				Requeue time.Duration
				Phase   v1alpha1.Phase
				Writes  int
			}
			want := outcome{tt.wantRequeue, tt.wantPhase, tt.wantWrites}
			if diff := cmp.Diff(want, outcome{res.RequeueAfter, got.Status.Phase, *statusWrites}); diff != "" {
				t.Errorf("after one reconcile (-want +got):\n%s", diff)
			}
		})
	}
}

// newCacheMissReconciler reconciles one new Userland (namespace "class",
// "ada", template "t", created now by clk) whose cache holds no template,
// with api as the API server's reader; it counts status writes.
func newCacheMissReconciler(api client.Reader, clk *clocktesting.FakeClock) (*UserlandReconciler, *int) {
	ul := testobj.MakeUserland("class", "ada", "ada", "t").Obj()
	ul.CreationTimestamp = metav1.NewTime(clk.Now())
	writes := 0
	cache := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).
		WithObjects(ul).WithStatusSubresource(ul).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				writes++
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
		}).Build()
	r := &UserlandReconciler{Client: cache, APIReader: api, Clock: clk}
	r.status = reconcile.NewStatusPatcher(r.Client, "userland", func(ul *v1alpha1.Userland) *v1alpha1.UserlandStatus { return &ul.Status })
	return r, &writes
}
