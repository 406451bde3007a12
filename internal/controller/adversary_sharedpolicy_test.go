package controller_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/testobj"
)

// Adversary: a Userland is switched from template a to b while its
// environment runs (the change is deferred by the rollout policy, so the
// pod keeps a's policy label), then template a is deleted (the course moved
// on). a's shared policy is kept only while a pod with its label is in the
// cache. The pod is force-deleted (eviction of a lost node, kubectl delete
// --force): its ReplicaSet makes a replacement from the unchanged pod
// template, still labelled for a's policy; if the GC looks between the old
// pod going and the new one reaching the cache, it deletes a's policy and
// nothing ever makes it again (no Userland refers to a). The replacement
// pod then runs selected by no policy at all.
func TestAdversaryTemplateSwitchThenDeleteLeavesPodUnselected(t *testing.T) {
	switchThenDelete(t, client.GracePeriodSeconds(0))
}

// The same with an ordinary (graceful) pod deletion, e.g. a node drain.
func TestAdversaryTemplateSwitchThenDeleteGraceful(t *testing.T) {
	switchThenDelete(t)
}

func switchThenDelete(t *testing.T, opts ...client.DeleteOption) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	a := testobj.MakeTemplate(ns, "a").Container("web").Image("example.org/app:1").Obj()
	a.Spec.Rollout.Policy = v1alpha1.RolloutOnRestart
	b := testobj.MakeTemplate(ns, "b").Container("web").Image("example.org/app:2").Obj()
	b.Spec.Rollout.Policy = v1alpha1.RolloutOnRestart
	create(t, a, b, userland(ns, "u", "alice", "a"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)

	patch := []byte(`{"spec":{"templateRef":{"name":"b"}}}`)
	if err := env.Client.Patch(ctx, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "u"}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	waitPending(t, ns, "u")
	if err := env.Client.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	polA := types.NamespacedName{Namespace: ns, Name: sharedPolicy("a")}
	if err := env.Client.Get(ctx, polA, &networkingv1.NetworkPolicy{}); err != nil {
		t.Fatalf("a's policy while its pod runs: %v", err)
	}

	for round := 0; round < 5; round++ {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelUserland: "u"}); err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp != nil {
				continue
			}
			if err := env.Client.Delete(ctx, &pods.Items[i], opts...); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
		// Let the ReplicaSet replace it and the GC look.
		time.Sleep(3 * time.Second)
		var pols networkingv1.NetworkPolicyList
		if err := env.Client.List(ctx, &pols, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelUserland: "u"}); err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil {
				continue
			}
			if got := selecting(t, pols.Items, p); len(got) == 0 {
				t.Fatalf("round %d: pod %s (label %s=%q) is selected by no NetworkPolicy; policies left: %v",
					round, p.Name, controller.LabelNetworkPolicy, p.Labels[controller.LabelNetworkPolicy], names(pols.Items))
			}
		}
		t.Logf("round %d: %d pods, all selected; policies %v", round, len(pods.Items), names(pols.Items))
	}
	// Once the switch is rolled out, a's policy is unused and goes.
	patch = []byte(`{"metadata":{"annotations":{"` + v1alpha1.AnnotationRestartedAt + `":"2026-11-25T10:00:00Z"}}}`)
	if err := env.Client.Patch(ctx, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "u"}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "a's policy deleted once the switch is rolled out", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, polA, &networkingv1.NetworkPolicy{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

func names(pols []networkingv1.NetworkPolicy) []string {
	var out []string
	for _, p := range pols {
		out = append(out, p.Name)
	}
	return out
}

// Adversary: during the upgrade window an environment an earlier version
// made is selected by both its per-Userland policy and the shared one, and
// egress allowed is the union of the two. The earlier controller kept the
// per-Userland policy at the template's rules; this one never writes it
// again. A template author who narrows egress (drops an allowed network)
// narrows only the shared policy: the environment keeps reaching the
// dropped network through the stale per-Userland policy until its pod is
// restarted, which under OnRestart may be never.
func TestAdversaryUpgradeWindowKeepsStaleEgressOfTheOldPolicy(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	tmpl := earlierEnvironment(t, ns, &v1alpha1.NetworkSpec{AllowedCIDRs: []v1alpha1.CIDR{"10.20.0.0/16"}},
		networkingv1.NetworkPolicySpec{PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress(kubeDNS, block("10.20.0.0/16"))})

	// The template author withdraws the network.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl); err != nil {
		t.Fatal(err)
	}
	tmpl.Spec.Network = nil
	if err := env.Client.Update(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, 30*time.Second, "the shared policy narrowed", func(ctx context.Context) (bool, error) {
		var np networkingv1.NetworkPolicy
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: sharedPolicy("t")}, &np)
		return err == nil && len(np.Spec.Egress) == 2, client.IgnoreNotFound(err)
	})
	time.Sleep(3 * time.Second)
	var pols networkingv1.NetworkPolicyList
	if err := env.Client.List(ctx, &pols, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelUserland: "u"}); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		for _, np := range selecting(t, pols.Items, &pods.Items[i]) {
			for _, rule := range np.Spec.Egress {
				for _, peer := range rule.To {
					if peer.IPBlock != nil && peer.IPBlock.CIDR == "10.20.0.0/16" {
						t.Errorf("pod %s may still reach 10.20.0.0/16, which its template no longer allows, through policy %s", pods.Items[i].Name, np.Name)
					}
				}
			}
		}
	}
}

// Adversary: a NetworkPolicy with the shared name is there before any
// environment, made by someone else (a namespace admin's GitOps repo, a
// copy of the real one) and carrying the managed-by label, so the
// controller takes it for its own instead of failing closed. Its server-side
// apply sets the fields it owns and leaves the others' fields: here a
// matchExpressions the pods never satisfy stays in the pod selector, and
// every environment pod of the template would run selected by no policy.
// Holds: the apply replaces the selector and the rules.
func TestAdversaryForeignManagedLabelledPolicyIsRewritten(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	name := sharedPolicy("t")
	foreign := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, controller.LabelNetworkPolicy: name}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{
				MatchLabels:      map[string]string{controller.LabelNetworkPolicy: name},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "example.org/never", Operator: metav1.LabelSelectorOpExists}},
			},
			PolicyTypes: ingressOnly,
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{}},
		},
	}
	create(t, foreign)
	create(t, testobj.MakeTemplate(ns, "t").Container("web").Image("example.org/app:1").Obj(), userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	time.Sleep(2 * time.Second)
	var pols networkingv1.NetworkPolicyList
	if err := env.Client.List(ctx, &pols, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelUserland: "u"}); err != nil {
		t.Fatal(err)
	}
	for _, np := range pols.Items {
		t.Logf("policy %s: selector %v, ingress %d rules, annotations %v", np.Name, np.Spec.PodSelector, len(np.Spec.Ingress), np.Annotations)
	}
	for i := range pods.Items {
		if got := selecting(t, pols.Items, &pods.Items[i]); len(got) == 0 {
			t.Errorf("pod %s runs selected by no NetworkPolicy", pods.Items[i].Name)
		}
	}
}

// Adversary: a Userland named exactly like its template's shared policy
// would have its own (retired) policy looked up under that name. The API
// server refuses the name: a Userland's name is a DNS label (no dots).
func TestAdversaryUserlandNamedLikeTheSharedPolicy(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	err := env.Client.Create(context.Background(), userland(ns, sharedPolicy("t"), "mallory", "t"))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("creating a Userland named %q: %v, want Invalid", sharedPolicy("t"), err)
	}
}

// Adversary: the GC decides "template gone, no Userland" from the cache and
// then deletes. A template deleted and at once re-created (kubectl replace
// --force, a GitOps Replace sync) with a Userland made right after races
// it: the Userland's reconcile may still see the policy in its cache and
// start the pod while the GC deletes the policy. Looks for a moment when a
// pod with the label exists and the policy does not.
func TestAdversaryTemplateRecreatedRacesTheGC(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	mk := func() *v1alpha1.Template {
		return testobj.MakeTemplate(ns, "t").Container("web").Image("example.org/app:1").Obj()
	}
	create(t, mk(), userland(ns, "u0", "alice", "t"))
	env.WaitPhase(t, ns, "u0", v1alpha1.PhaseReady)
	if err := env.Client.Delete(ctx, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "u0"}}); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: sharedPolicy("t")}
	windows := 0
	for i := 1; i <= 8; i++ {
		if err := env.Client.Delete(ctx, &v1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t"}}); err != nil {
			t.Fatal(err)
		}
		name := "u" + string(rune('0'+i))
		create(t, mk(), userland(ns, name, "alice", "t"))
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			var pods corev1.PodList
			if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{controller.LabelNetworkPolicy: key.Name}); err != nil {
				t.Fatal(err)
			}
			err := env.Client.Get(ctx, key, &networkingv1.NetworkPolicy{})
			if apierrors.IsNotFound(err) && len(pods.Items) > 0 {
				windows++
				t.Logf("round %d: %d pods labelled for the policy while it does not exist", i, len(pods.Items))
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := env.Client.Delete(ctx, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		env.Eventually(t, time.Minute, "pods gone", func(ctx context.Context) (bool, error) {
			var pods corev1.PodList
			err := env.Client.List(ctx, &pods, client.InNamespace(ns))
			return err == nil && len(pods.Items) == 0, err
		})
	}
	if windows > 0 {
		t.Errorf("in %d of 8 rounds a pod carried the label of a policy that did not exist", windows)
	}
	// In the end the policy is there for the template.
	env.Eventually(t, 30*time.Second, "the policy exists", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, key, &networkingv1.NetworkPolicy{})
		return err == nil, client.IgnoreNotFound(err)
	})
}

// Adversary: setup.go says "a shared policy deleted or changed by someone
// else is put back by the next of its Userlands". Someone with edit rights
// on NetworkPolicies opens the shared policy to every source (kubectl edit
// keeps the annotations). Its generation changes, its Userlands are
// reconciled, and apply skips the write because the applied-hash
// annotation still matches: the change stays.
func TestAdversaryEditedSharedPolicyIsNotPutBack(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	create(t, testobj.MakeTemplate(ns, "t").Container("web").Image("example.org/app:1").Obj(), userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	key := types.NamespacedName{Namespace: ns, Name: sharedPolicy("t")}
	var np networkingv1.NetworkPolicy
	if err := env.Client.Get(ctx, key, &np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
	if err := env.Client.Update(ctx, &np); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	if err := env.Client.Get(ctx, key, &np); err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) == 0 {
		t.Errorf("the shared policy still admits every source 4s after the edit: ingress %v", np.Spec.Ingress)
	}
}

// Adversary: a template author writes Userland's own labels into the pod
// template (another template's policy label, another Userland's name, a
// foreign managed-by), and a Template and a ClusterTemplate share a name in
// one namespace. Every environment pod must still carry its own policy's
// label and be selected by exactly that policy.
func TestAdversaryTemplateLabelsAndKindNamesakes(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	w := testobj.MakeTemplate(ns, "x").Container("web").Image("example.org/app:1")
	ct := w.Cluster()
	ct.Name = ns + "-x" // cluster-wide: unique per test
	tmpl := testobj.MakeTemplate(ns, ct.Name).Container("web").Image("example.org/app:1").Obj()
	tmpl.Spec.PodTemplate.Labels = map[string]string{
		controller.LabelNetworkPolicy: naming.TemplateNetworkPolicy(v1alpha1.TemplateKindClusterTemplate, ct.Name),
		v1alpha1.LabelUserland:        "victim",
		v1alpha1.LabelManagedBy:       "someone-else",
	}
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatalf("creating the template: %v", err) // a refusal would hold too
	}
	if err := env.Client.Create(ctx, ct); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ct) })
	create(t, userland(ns, "a", "alice", ct.Name), testobj.MakeUserland(ns, "b", "bob", ct.Name).ClusterTemplate().Obj())
	env.WaitPhase(t, ns, "a", v1alpha1.PhaseReady)
	env.WaitPhase(t, ns, "b", v1alpha1.PhaseReady)
	var pols networkingv1.NetworkPolicyList
	if err := env.Client.List(ctx, &pols, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"a": naming.TemplateNetworkPolicy(v1alpha1.TemplateKindTemplate, ct.Name),
		"b": naming.TemplateNetworkPolicy(v1alpha1.TemplateKindClusterTemplate, ct.Name),
	}
	for _, ul := range []string{"a", "b"} {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelUserland: ul}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 {
			t.Errorf("no pod of %s", ul)
		}
		for i := range pods.Items {
			got := selecting(t, pols.Items, &pods.Items[i])
			if len(got) != 1 || got[0].Name != want[ul] {
				t.Errorf("pod of %s selected by %v, want only %s", ul, names(got), want[ul])
			}
			if m := pods.Items[i].Labels[v1alpha1.LabelManagedBy]; m != v1alpha1.ManagedByValue {
				t.Errorf("pod of %s managed-by %q", ul, m)
			}
		}
	}
}

// Adversary (podServing): a Userland deleted and made again under the same
// name for the same user and template has the same pod template hash. The
// old environment's pod lingers while the garbage collector works down
// Deployment → ReplicaSet → pod; it carries the Userland label and the
// current hash and is Ready. The Deployment's own status never counts it,
// but a check that trusts any such pod reports the new environment Ready
// before its own pod is.
func TestAdversaryRecreatedUserlandReadyFromTheOldPod(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	create(t, testobj.MakeTemplate(ns, "t").Container("web").Image("example.org/app:1").Obj(), userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	if err := env.Client.Delete(ctx, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "u"}}); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, 30*time.Second, "the old Userland gone", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "u"}, &v1alpha1.Userland{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	create(t, userland(ns, "u", "alice", "t"))
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var ul v1alpha1.Userland
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "u"}, &ul); err != nil {
			t.Fatal(err)
		}
		if ul.Status.Phase != v1alpha1.PhaseReady {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		var dep appsv1.Deployment
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "u"}, &dep); err != nil {
			t.Fatalf("Ready without a Deployment: %v", err)
		}
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelUserland: "u"}); err != nil {
			t.Fatal(err)
		}
		own := 0
		var seen []string
		for _, p := range pods.Items {
			ref := metav1.GetControllerOf(&p)
			seen = append(seen, p.Name)
			if ref == nil || p.DeletionTimestamp != nil {
				continue
			}
			var rs appsv1.ReplicaSet
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, &rs); err != nil {
				continue // the old ReplicaSet, already gone
			}
			if metav1.IsControlledBy(&rs, &dep) {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
						own++
					}
				}
			}
		}
		if own == 0 {
			t.Errorf("the new Userland is Ready while no pod of its own Deployment is Ready; pods with its label: %v", seen)
		}
		return
	}
	t.Fatal("the new Userland never became Ready")
}

// Adversary (creation memo): the shared policy is deleted right after the
// controller creates it, before its informer shows it. Userland's memo of
// creations then says "created, the cache lags" for up to 5 s, so neither
// the delete event's reconciles nor the other Userlands' re-create it,
// and the pipeline goes on to make their pods. Measures how long pods with
// the policy's label run while the policy does not exist.
func TestAdversaryPolicyDeletedBeforeTheCacheSawIt(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	key := types.NamespacedName{Namespace: ns, Name: sharedPolicy("t")}
	deleted := make(chan time.Time, 1)
	go func() {
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
			var np networkingv1.NetworkPolicy
			if err := env.Client.Get(ctx, key, &np); err == nil {
				uid := np.UID
				if err := env.Client.Delete(ctx, &np, client.Preconditions{UID: &uid}); err == nil {
					deleted <- time.Now()
				}
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	create(t, testobj.MakeTemplate(ns, "t").Container("web").Image("example.org/app:1").Obj())
	for _, n := range []string{"a", "b", "c", "d"} {
		create(t, userland(ns, n, n+"@example.edu", "t"))
	}
	var at time.Time
	select {
	case at = <-deleted:
	case <-time.After(20 * time.Second):
		t.Fatal("the policy never appeared")
	}
	var openSince time.Time
	var open time.Duration
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{controller.LabelNetworkPolicy: key.Name}); err != nil {
			t.Fatal(err)
		}
		err := env.Client.Get(ctx, key, &networkingv1.NetworkPolicy{})
		if apierrors.IsNotFound(err) && len(pods.Items) > 0 {
			if openSince.IsZero() {
				openSince = time.Now()
			}
			continue
		}
		if !openSince.IsZero() {
			open += time.Since(openSince)
			openSince = time.Time{}
		}
		if err == nil {
			break
		}
	}
	if !openSince.IsZero() {
		open += time.Since(openSince)
	}
	t.Logf("policy deleted %v; pods with its label ran without it for %v", at.Format(time.StampMilli), open.Round(time.Millisecond))
	if open > time.Second {
		t.Errorf("environment pods ran for %v selected by no policy after the policy was deleted", open.Round(time.Millisecond))
	}
}
