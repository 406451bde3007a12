package controller

// An adversary's review of two changes: a template confirmed in the API
// server before TemplateNotFound is written, and which in-flight restarts
// the Immediate budget counts. Pure unit tests over controller-runtime's
// fake client: what they decide is arithmetic over what a cache and an
// API server hold, not anything the API server itself decides.

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/templates"
	"github.com/userland-dev/userland/internal/testobj"
)

const adv4NS = "class"

var adv4Now = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

// adv4Env is a running sibling of template tmpl whose cached Deployment has
// pod-template hash hash, available or not.
func adv4Env(name, tmpl, hash string, available bool) []client.Object {
	ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: adv4NS, Name: name},
		Spec: v1alpha1.UserlandSpec{User: name, TemplateRef: v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: tmpl}}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: adv4NS, Name: name, Generation: 1},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
	dep.Spec.Template.Annotations = map[string]string{AnnotationTemplateHash: hash}
	dep.Status.ObservedGeneration = 1
	if available {
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
	}
	return []client.Object{ul, dep}
}

func adv4Budget(t *testing.T, objs []client.Object, tmpl, deciding string, maxUnavailable intstr.IntOrString, prepare func(r *UserlandReconciler)) bool {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).
		WithIndex(&v1alpha1.Userland{}, IndexTemplateKey, IndexUserlandByTemplate).
		WithObjects(objs...).Build()
	r := &UserlandReconciler{Client: c}
	if prepare != nil {
		prepare(r)
	}
	key := templates.Key(v1alpha1.TemplateKindTemplate, adv4NS, tmpl)
	spec := &v1alpha1.TemplateSpec{Rollout: v1alpha1.RolloutSpec{Policy: v1alpha1.RolloutImmediate, MaxUnavailable: &maxUnavailable}}
	s := &reconcileState{
		ul:       &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: adv4NS, Name: deciding}},
		now:      adv4Now,
		template: &templates.Resolved{Kind: v1alpha1.TemplateKindTemplate, Name: tmpl, Key: key, Spec: spec},
	}
	ok, err := r.budgetAvailable(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// (d) is safe: the cache showing the restart's hash before kcm observed it
// still counts the environment, because rolledOut requires
// observedGeneration >= generation and the restart bumped generation.
func TestAdversaryToday4HashSeenButNotObservedStillCounts(t *testing.T) {
	t.Parallel()
	var objs []client.Object
	a := adv4Env("a", "t", "new", true)
	dep := a[1].(*appsv1.Deployment)
	dep.Generation = 2 // our write; status is still the old pod's (observed 1)
	objs = append(objs, a...)
	for _, n := range []string{"b", "c", "d"} {
		objs = append(objs, adv4Env(n, "t", "old", true)...)
	}
	got := adv4Budget(t, objs, "t", "b", intstr.FromString("25%"), func(r *UserlandReconciler) {
		r.inflight.add(templates.Key(v1alpha1.TemplateKindTemplate, adv4NS, "t"), types.NamespacedName{Namespace: adv4NS, Name: "a"}, adv4Now, "new")
	})
	if got {
		t.Errorf("a restart the cache shows written but not observed did not count: a second restart was allowed with maxUnavailable 1")
	}
}

// A listed environment whose Deployment the cache does not show (its
// managed-by label removed by anyone who may patch Deployments in the
// namespace, or deleted and not yet seen again) may still be restarting in
// the cluster: its recorded restart keeps counting.
func TestAdversaryToday4ListedButNotCachedRestartStillCounts(t *testing.T) {
	t.Parallel()
	var objs []client.Object
	a := adv4Env("a", "t", "old", true)
	objs = append(objs, a[0]) // a is listed under t; its Deployment is not in the cache
	for _, n := range []string{"b", "c", "d", "e"} {
		objs = append(objs, adv4Env(n, "t", "old", true)...)
	}
	// 4 running (a not seen) at 25% -> 1; a's restart is in flight.
	got := adv4Budget(t, objs, "t", "b", intstr.FromString("25%"), func(r *UserlandReconciler) {
		r.inflight.add(templates.Key(v1alpha1.TemplateKindTemplate, adv4NS, "t"), types.NamespacedName{Namespace: adv4NS, Name: "a"}, adv4Now, "new")
	})
	if got {
		t.Errorf("a listed environment's in-flight restart stopped counting because its Deployment is missing from the cache: a second restart was allowed with maxUnavailable 1")
	}
}

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
