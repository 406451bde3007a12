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
	} {
		binds := controller.BindsIncarnation(tc.dep)
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
