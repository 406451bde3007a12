package controller

// An adversary's review of the template confirmed in the API server before
// TemplateNotFound is written (its findings on the rollout budget are rows
// of TestRolloutBudgetCountsUnavailableAndInflightRestarts). Pure unit
// tests over controller-runtime's fake client: what they decide is what a
// cache and an API server hold, not anything the API server decides.

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

const adv4NS = "class"

var adv4Now = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

// A cache that never shows a template the API server has (an informer that
// stopped) is waited for only while the Userland is young: after
// cacheLagLimit the cache's answer stands, TemplateNotFound is written
// once, and the one-second rechecks end.
func TestAdversaryToday4CacheBehindIsWaitedForBoundedly(t *testing.T) {
	t.Parallel()
	apiGets := 0
	api := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).
		WithObjects(testobj.MakeTemplate(adv4NS, "t").Container("web").Image("example.org/app:1").Obj()).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				apiGets++
				return c.Get(ctx, key, obj, opts...)
			},
		}).Build()
	clk := clocktesting.NewFakeClock(adv4Now)
	r, writes := newCacheMissReconciler(api, clk)
	key := types.NamespacedName{Namespace: adv4NS, Name: "ada"}
	rounds := 0
	for ; rounds < 600; rounds++ { // at most ten minutes of rechecks
		res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
		if err != nil {
			t.Fatalf("round %d: %v", rounds, err)
		}
		if res.RequeueAfter != cacheLagRecheck {
			break
		}
		clk.Step(res.RequeueAfter)
	}
	var got v1alpha1.Userland
	if err := r.Client.Get(context.Background(), key, &got); err != nil {
		t.Fatal(err)
	}
	t.Logf("rechecks %d, uncached reads %d, status writes %d, phase %q", rounds, apiGets, *writes, got.Status.Phase)
	if limit := int(cacheLagLimit / cacheLagRecheck); rounds > limit+1 || apiGets > limit+1 {
		t.Errorf("the cache was waited for %d rechecks with %d uncached reads, want at most %d", rounds, apiGets, limit+1)
	}
	if *writes != 1 || got.Status.Phase != v1alpha1.PhasePending {
		t.Errorf("after the wait: %d status writes, phase %q; want 1 write, %q", *writes, got.Status.Phase, v1alpha1.PhasePending)
	}
}

// When the API server cannot be asked (throttled, or forbidden), the
// cache's answer stands: TemplateNotFound, and the API server's own words
// (naming the controller's ServiceAccount) stay out of a status anyone
// who reads the Userland sees.
func TestAdversaryToday4APIErrorLeavesTemplateNotFound(t *testing.T) {
	t.Parallel()
	api := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				return apierrors.NewForbidden(v1alpha1.GroupVersion.WithResource("templates").GroupResource(), key.Name, errForbiddenSA)
			},
		}).Build()
	r, _ := newCacheMissReconciler(api, clocktesting.NewFakeClock(adv4Now))
	key := types.NamespacedName{Namespace: adv4NS, Name: "ada"}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	var got v1alpha1.Userland
	if err := r.Client.Get(context.Background(), key, &got); err != nil {
		t.Fatal(err)
	}
	resolved := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionTemplateResolved)
	if resolved == nil || resolved.Reason != v1alpha1.ReasonTemplateNotFound {
		t.Errorf("TemplateResolved is %+v, want reason %s", resolved, v1alpha1.ReasonTemplateNotFound)
	}
	for _, c := range got.Status.Conditions {
		if strings.Contains(c.Message, "serviceaccount") || strings.Contains(c.Message, "cannot get") {
			t.Errorf("condition %s shows the API server's error: %q", c.Type, c.Message)
		}
	}
}

type adv4Err string

func (e adv4Err) Error() string { return string(e) }

var errForbiddenSA = adv4Err(`User "system:serviceaccount:userland-system:userland-controller" cannot get resource "templates"`)
