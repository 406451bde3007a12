package controller_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/testobj"
)

// ingressOn is wantIngress on another port.
func ingressOn(port int32) []networkingv1.NetworkPolicyIngressRule {
	rules := []networkingv1.NetworkPolicyIngressRule{*wantIngress[0].DeepCopy()}
	rules[0].Ports[0].Port = ptr.To(intstr.FromInt32(port))
	return rules
}

// selecting lists the policies of pols whose pod selector matches pod, as
// the API server's own selector semantics say.
func selecting(t *testing.T, pols []networkingv1.NetworkPolicy, pod *corev1.Pod) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for _, np := range pols {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatalf("policy %s: %v", np.Name, err)
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, np)
		}
	}
	return out
}

// Environments of one template in a namespace share one NetworkPolicy, and
// every environment pod is still selected by exactly one policy that admits
// only the gateway on its template's port, with its template's egress: what
// the per-environment policies admitted and refused, pod by pod. A pod of
// another template gets its own template's rules.
func TestOneNetworkPolicyPerTemplateIsolatesEveryPod(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	open := testobj.MakeTemplate(ns, "open").Container("web").Image("example.org/app:1").Port(8888).Obj()
	open.Spec.Network = &v1alpha1.NetworkSpec{Egress: v1alpha1.EgressUnrestricted}
	create(t, template(ns, "t", "example.org/app:1"), open,
		userland(ns, "a", "alice", "t"), userland(ns, "b", "bob", "t"), userland(ns, "c", "carol", "open"))
	for _, n := range []string{"a", "b", "c"} {
		env.WaitPhase(t, ns, n, v1alpha1.PhaseReady)
	}

	var pols networkingv1.NetworkPolicyList
	if err := env.Client.List(ctx, &pols, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, np := range pols.Items {
		names = append(names, np.Name)
		if len(np.OwnerReferences) != 0 {
			t.Errorf("shared policy %s has owners %v; it must outlive any one Userland", np.Name, np.OwnerReferences)
		}
	}
	slices.Sort(names)
	want := []string{sharedPolicy("open"), sharedPolicy("t")}
	slices.Sort(want)
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("network policies in the namespace (-want +got):\n%s", diff)
	}

	wantSpec := map[string]networkingv1.NetworkPolicySpec{
		"a": {PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress(kubeDNS)},
		"b": {PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress(kubeDNS)},
		"c": {PolicyTypes: ingressOnly, Ingress: ingressOn(8888)},
	}
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for i := range pods.Items {
		pod := &pods.Items[i]
		owner := pod.Labels[v1alpha1.LabelUserland]
		got := selecting(t, pols.Items, pod)
		if len(got) != 1 {
			t.Errorf("pod %s (of %s) is selected by %d policies, want exactly 1", pod.Name, owner, len(got))
			continue
		}
		seen++
		spec := got[0].Spec
		spec.PodSelector = metav1.LabelSelector{}
		if diff := cmp.Diff(wantSpec[owner], spec); diff != "" {
			t.Errorf("rules isolating pod %s of %s (-want +got):\n%s", pod.Name, owner, diff)
		}
	}
	if seen != 3 {
		t.Errorf("checked %d environment pods, want 3", seen)
	}
	t.Logf("%d pods, %d policies", len(pods.Items), len(pols.Items))
}

// An environment an earlier version made has its own NetworkPolicy and a
// pod template without the shared policy's label. Upgrading restarts
// nobody: the label waits for the template's rollout policy (OnRestart
// here), the old policy stays while any pod lacks the label, and goes once
// the restart has put the label on every pod.
func TestUpgradeRetiresThePerUserlandPolicyOnlyOnceItsPodsAreCovered(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	earlierEnvironment(t, ns, nil, networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: wantIngress})

	// The running pod lacks the label: both policies stay.
	for _, name := range []string{"u", sharedPolicy("t")} {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &networkingv1.NetworkPolicy{}); err != nil {
			t.Fatalf("policy %s while the old pod runs: %v", name, err)
		}
	}
	time.Sleep(2 * time.Second) // room for a wrong deletion to happen
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "u"}, &networkingv1.NetworkPolicy{}); err != nil {
		t.Fatalf("the per-Userland policy went while its pod lacked the shared label: %v", err)
	}

	start := time.Now()
	patch := []byte(`{"metadata":{"annotations":{"` + v1alpha1.AnnotationRestartedAt + `":"2026-11-25T10:00:00Z"}}}`)
	if err := env.Client.Patch(ctx, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "u"}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "the per-Userland policy retired", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "u"}, &networkingv1.NetworkPolicy{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	t.Logf("retired %v after the restart request", time.Since(start).Round(time.Millisecond))
	// By then every pod of the environment carries the shared label.
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelUserland: "u"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Labels[controller.LabelNetworkPolicy] != sharedPolicy("t") {
			t.Errorf("pod %s (deleting: %v) lacks the shared policy's label after the old policy went", p.Name, p.DeletionTimestamp != nil)
		}
	}
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
}

// earlierEnvironment is environment "u" of ns as an earlier version left
// it (earlierVersion, with rules for its own policy), of the OnRestart
// template "t" (network, if set), which appears last, so the controller
// makes nothing before the earlier version's children are in place; it
// returns the template once the environment's update is pending. No
// volumes: the earlier version's pod must start before the controller
// (which makes claims) has seen the template.
func earlierEnvironment(t *testing.T, ns string, network *v1alpha1.NetworkSpec, rules networkingv1.NetworkPolicySpec) *v1alpha1.Template {
	t.Helper()
	ul := userland(ns, "u", "alice", "t")
	create(t, ul)
	tmpl := testobj.MakeTemplate(ns, "t").Container("web").Image("example.org/app:1").Obj()
	tmpl.Spec.Rollout.Policy = v1alpha1.RolloutOnRestart
	if network != nil {
		tmpl.Spec.Network = network
	}
	earlierVersion(t, ul, tmpl, rules)
	create(t, tmpl)
	waitPending(t, ns, "u")
	return tmpl
}

// earlierVersion makes what a controller before the shared policy made for
// ul from tmpl: a running Deployment whose pods lack the shared policy's
// label, and a NetworkPolicy named after ul, owned by it and selecting its
// pods, with rules; it returns once the pod is Ready.
func earlierVersion(t *testing.T, ul *v1alpha1.Userland, tmpl *v1alpha1.Template, rules networkingv1.NetworkPolicySpec) {
	t.Helper()
	pod := controller.PodTemplate(ul, &tmpl.Spec, controller.Routes{})
	delete(pod.Labels, controller.LabelNetworkPolicy)
	delete(pod.Labels, v1alpha1.LabelUserlandUID)
	pod.Annotations[controller.AnnotationTemplateHash] = "made-by-an-earlier-version"
	old := controller.Deployment(ul, pod, 1, nil)
	rules.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelUserland: ul.Name}}
	oldPolicy := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ul.Namespace, Name: ul.Name, Labels: old.Labels, OwnerReferences: old.OwnerReferences},
		Spec:       rules,
	}
	create(t, oldPolicy, old)
	env.Eventually(t, time.Minute, "the earlier version's pod runs", func(ctx context.Context) (bool, error) {
		var d appsv1.Deployment
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ul), &d)
		return err == nil && d.Status.ReadyReplicas == 1, err
	})
}

// A shared policy stays while its template exists, used or not, and goes
// once the template is deleted and nothing uses it.
func TestSharedPolicyGoesWithItsTemplateOnceUnused(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	tmpl := template(ns, "t", "example.org/app:1")
	create(t, tmpl, userland(ns, "u", "alice", "t"), userland(ns, "v", "bob", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	env.WaitPhase(t, ns, "v", v1alpha1.PhaseReady)
	key := types.NamespacedName{Namespace: ns, Name: sharedPolicy("t")}
	exists := func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, key, &networkingv1.NetworkPolicy{})
		return err == nil, client.IgnoreNotFound(err)
	}

	// The template goes first: "v" still uses the policy.
	if err := env.Client.Delete(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "u"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // room for a wrong deletion
	if ok, err := exists(ctx); !ok {
		t.Fatalf("the policy went while a Userland of its template remained (err %v)", err)
	}
	start := time.Now()
	if err := env.Client.Delete(ctx, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "v"}}); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "the unused policy of the deleted template deleted", func(ctx context.Context) (bool, error) {
		ok, err := exists(ctx)
		return !ok, err
	})
	t.Logf("deleted %v after the last Userland", time.Since(start).Round(time.Millisecond))
	// Only once no pod carried its label.
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{controller.LabelNetworkPolicy: key.Name}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("%d pods with the policy's label remain after it was deleted", len(pods.Items))
	}
}

// While the template exists, an unused policy stays: deleting it could race
// a Userland being created (see SharedPolicyReconciler).
func TestSharedPolicyOfALiveTemplateStays(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	create(t, template(ns, "t", "example.org/app:1"), userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	if err := env.Client.Delete(ctx, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "u"}}); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "the environment's pods gone", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		err := env.Client.List(ctx, &pods, client.InNamespace(ns))
		return err == nil && len(pods.Items) == 0, err
	})
	time.Sleep(2 * time.Second)
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: sharedPolicy("t")}, &networkingv1.NetworkPolicy{}); err != nil {
		t.Errorf("the policy of an existing template: %v, want it kept", err)
	}
}

// SharedPolicyCovers decides when the per-Userland policy may go.
func TestSharedPolicyCovers(t *testing.T) {
	t.Parallel()
	const policy = "userland.template.t-12345678"
	labelled := map[string]string{controller.LabelNetworkPolicy: policy}
	dep := func(l map[string]string) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		d.Spec.Template.Labels = l
		return d
	}
	pod := func(l map[string]string) corev1.Pod { return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: l}} }
	cases := []struct {
		name string
		dep  *appsv1.Deployment
		pods []corev1.Pod
		want bool
	}{
		{"no deployment, no pods", nil, nil, true},
		{"labelled template, no pods (stopped)", dep(labelled), nil, true},
		{"labelled template and pod", dep(labelled), []corev1.Pod{pod(labelled)}, true},
		{"unlabelled template", dep(nil), nil, false},
		{"template of another policy", dep(map[string]string{controller.LabelNetworkPolicy: "userland.template.other-1"}), nil, false},
		{"old pod still there", dep(labelled), []corev1.Pod{pod(nil), pod(labelled)}, false},
		{"no deployment but an old pod", nil, []corev1.Pod{pod(nil)}, false},
	}
	var got, want []string
	for _, tc := range cases {
		if controller.SharedPolicyCovers(policy, tc.dep, tc.pods) {
			got = append(got, tc.name)
		}
		if tc.want {
			want = append(want, tc.name)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cases where the per-Userland policy may go (-want +got):\n%s", diff)
	}
}
