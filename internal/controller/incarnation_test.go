package controller_test

import (
	"context"
	"maps"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/course"
)

// TestAnEnvironmentIsBoundToItsUserlandsUID: a new environment's pods
// carry its Userland's UID and its Service selects by it, so a Userland
// created again under an earlier one's name never selects the earlier
// one's pods. An environment an earlier version made (its pods without
// the UID) keeps its pod, unrestarted, and its name-only Service.
func TestAnEnvironmentIsBoundToItsUserlandsUID(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	tmpl := template(ns, "t", "example.org/app:1")
	// "old" waits for its template while an earlier version's Deployment
	// is planted for it, exactly as that version built it.
	create(t, userland(ns, "old", "alice", "t"))
	env.WaitPhase(t, ns, "old", v1alpha1.PhasePending)
	old, err := get(t, ctx, ns, "old")
	if err != nil {
		t.Fatal(err)
	}
	routes := controller.Routes{GatewayURL: must(url.Parse(gatewayURL))}
	planted := controller.Deployment(old, controller.PodTemplateFor(old, &tmpl.Spec, routes, nil, course.None, false), 1, nil)
	create(t, planted, tmpl, userland(ns, "new", "bob", "t"))
	env.WaitPhase(t, ns, "old", v1alpha1.PhaseReady)
	env.WaitPhase(t, ns, "new", v1alpha1.PhaseReady)
	oldPod := runningPod(t, ns, "old")
	time.Sleep(2 * time.Second) // room for a wrong restart

	selectors := map[string]map[string]string{}
	podLabels := map[string]string{}
	for _, name := range []string{"old", "new"} {
		var svc corev1.Service
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
			t.Fatal(err)
		}
		selectors[name] = svc.Spec.Selector
		var dep appsv1.Deployment
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
			t.Fatal(err)
		}
		podLabels[name] = dep.Spec.Template.Labels[v1alpha1.LabelUserlandUID]
		if name == "old" && dep.Generation != planted.Generation {
			t.Errorf("the earlier version's Deployment was changed to generation %d (its pod restarted)", dep.Generation)
		}
	}
	newUL, err := get(t, ctx, ns, "new")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"old": {v1alpha1.LabelUserland: "old"},
		"new": {v1alpha1.LabelUserland: "new", v1alpha1.LabelUserlandUID: string(newUL.UID)},
	}
	if diff := cmp.Diff(want, selectors); diff != "" {
		t.Errorf("Service selectors (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"old": "", "new": string(newUL.UID)}, podLabels); diff != "" {
		t.Errorf("pod templates' %s (-want +got):\n%s", v1alpha1.LabelUserlandUID, diff)
	}
	if now := runningPod(t, ns, "old"); now != oldPod {
		t.Errorf("the earlier version's pod %s was replaced by %s", oldPod, now)
	}

	// A restart replaces the pod anyway: the environment is bound then.
	start := time.Now()
	patch := []byte(`{"metadata":{"annotations":{"` + v1alpha1.AnnotationRestartedAt + `":"2026-11-27T10:00:00Z"}}}`)
	if err := env.Client.Patch(ctx, old, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "the restarted earlier environment bound", func(ctx context.Context) (bool, error) {
		var svc corev1.Service
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "old"}, &svc); err != nil {
			return false, err
		}
		var dep appsv1.Deployment
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "old"}, &dep); err != nil {
			return false, err
		}
		return svc.Spec.Selector[v1alpha1.LabelUserlandUID] == string(old.UID) &&
			dep.Spec.Template.Labels[v1alpha1.LabelUserlandUID] == string(old.UID), nil
	})
	env.WaitPhase(t, ns, "old", v1alpha1.PhaseReady)
	if now := runningPod(t, ns, "old"); now == oldPod {
		t.Errorf("the restart kept pod %s", now)
	}
	t.Logf("bound %s after the restart request", time.Since(start).Round(time.Millisecond))
}

// runningPod is the name of the environment's one pod not being deleted.
func runningPod(t *testing.T, ns, name string) string {
	t.Helper()
	var found string
	env.Eventually(t, time.Minute, name+"'s pod runs", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelUserland: name}); err != nil {
			return false, err
		}
		var live []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p.Name)
			}
		}
		if len(live) == 1 {
			found = live[0]
		}
		return len(live) == 1, nil
	})
	return found
}

// TestPodsAndServiceCarryTheUIDOnlyWhenBound: the pure rules.
func TestPodsAndServiceCarryTheUIDOnlyWhenBound(t *testing.T) {
	t.Parallel()
	ul := userland("ns", "lab", "bob", "t")
	ul.UID = "uid-bob"
	tmpl := template("ns", "t", "example.org/app:1")
	// A template that names another Userland's UID gets nowhere with it.
	tmpl.Spec.PodTemplate.Labels = map[string]string{v1alpha1.LabelUserlandUID: "uid-alice", "app": "web"}
	legacy := &appsv1.Deployment{}
	bound := &appsv1.Deployment{}
	bound.Spec.Template.Labels = map[string]string{v1alpha1.LabelUserlandUID: "uid-bob"}
	edited := &appsv1.Deployment{}
	edited.Spec.Template.Labels = map[string]string{v1alpha1.LabelUserlandUID: "uid-alice"}
	for name, tc := range map[string]struct {
		dep              *appsv1.Deployment
		wantPod, wantSvc map[string]string
		wantBinds        bool
	}{
		"no Deployment yet": {nil, map[string]string{v1alpha1.LabelUserlandUID: "uid-bob"},
			map[string]string{v1alpha1.LabelUserland: "lab", v1alpha1.LabelUserlandUID: "uid-bob"}, true},
		"a Deployment this version made": {bound, map[string]string{v1alpha1.LabelUserlandUID: "uid-bob"},
			map[string]string{v1alpha1.LabelUserland: "lab", v1alpha1.LabelUserlandUID: "uid-bob"}, true},
		"an earlier version's Deployment": {legacy, map[string]string{},
			map[string]string{v1alpha1.LabelUserland: "lab"}, false},
		"a Deployment edited to another UID": {edited, map[string]string{},
			map[string]string{v1alpha1.LabelUserland: "lab"}, false},
	} {
		binds := controller.BindsIncarnation(ul, tc.dep)
		pod := controller.PodTemplateFor(ul, &tmpl.Spec, controller.Routes{}, nil, course.None, binds)
		gotPod := maps.Clone(pod.Labels)
		maps.DeleteFunc(gotPod, func(k, _ string) bool { return k != v1alpha1.LabelUserlandUID })
		got := struct {
			Binds    bool
			Pod, Svc map[string]string
		}{binds, gotPod, controller.Service(ul, 8080, binds).Spec.Selector}
		wantGot := struct {
			Binds    bool
			Pod, Svc map[string]string
		}{tc.wantBinds, tc.wantPod, tc.wantSvc}
		if diff := cmp.Diff(wantGot, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
		if pod.Labels["app"] != "web" {
			t.Errorf("%s: the template's own labels were lost: %v", name, pod.Labels)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestAnEarlierPodKeepsItsPolicyWhenTheDeploymentIsRemade: an earlier
// version's environment (its own NetworkPolicy, a pod without the shared
// policy's label) loses its Deployment; the controller makes a bound one,
// whose pods its health reads. The earlier pod, still terminating, is
// covered by no other policy, so the per-Userland one stays until that
// pod is gone: it is one of the pods the environment's name selects,
// whatever its UID label says.
func TestAnEarlierPodKeepsItsPolicyWhenTheDeploymentIsRemade(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	earlierEnvironment(t, ns, nil, networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: wantIngress})

	var pod corev1.Pod
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: runningPod(t, ns, "u")}, &pod); err != nil {
		t.Fatal(err)
	}
	const hold = "test.userland.dev/hold"
	setFinalizers := func(finalizers []string) error {
		patch := client.MergeFrom(pod.DeepCopy())
		pod.Finalizers = finalizers
		return client.IgnoreNotFound(env.Client.Patch(ctx, &pod, patch))
	}
	if err := setFinalizers([]string{hold}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = setFinalizers(nil) })
	if err := env.Client.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "u"}}); err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&pod), &corev1.Pod{}); err != nil {
			t.Fatalf("the held earlier pod: %v", err)
		}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "u"}, &networkingv1.NetworkPolicy{}); err != nil {
			t.Fatalf("the per-Userland policy went while the earlier pod, without the shared label, remained: %v", err)
		}
	}
	if err := setFinalizers(nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	env.Eventually(t, time.Minute, "the per-Userland policy retired once the earlier pod went", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "u"}, &networkingv1.NetworkPolicy{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	t.Logf("retired %s after the earlier pod was released", time.Since(start).Round(time.Millisecond))
}
