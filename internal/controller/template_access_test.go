package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/templates"
	"github.com/userland-dev/userland/internal/testobj"
)

func TestDecideNamespaceAccess(t *testing.T) {
	t.Parallel()
	databases := &metav1.LabelSelector{MatchLabels: map[string]string{"course": "databases"}}
	cluster := func(sel *metav1.LabelSelector) *templates.Resolved {
		return &templates.Resolved{Kind: v1alpha1.TemplateKindClusterTemplate, Name: "db", AllowedNamespaces: sel}
	}
	tests := map[string]struct {
		template *templates.Resolved
		labels   map[string]string
		want     controller.NamespaceAccess
	}{
		"a Template runs in its namespace": {
			template: &templates.Resolved{Kind: v1alpha1.TemplateKindTemplate, Name: "db"},
			want:     controller.NamespaceAccess{Allowed: true},
		},
		"no selector allows every namespace": {
			template: cluster(nil),
			want:     controller.NamespaceAccess{Allowed: true},
		},
		"matching labels": {
			template: cluster(databases),
			labels:   map[string]string{"course": "databases", "other": "x"},
			want:     controller.NamespaceAccess{Allowed: true},
		},
		"missing label": {
			template: cluster(databases),
			labels:   map[string]string{"other": "x"},
			want: controller.NamespaceAccess{Message: `ClusterTemplate "db" does not allow namespace "demo" (its allowedNamespaces selector is course=databases); ` +
				"the environment stays stopped, with its volumes kept, until it does"},
		},
		"empty selector allows every namespace": {
			template: cluster(&metav1.LabelSelector{}),
			want:     controller.NamespaceAccess{Allowed: true},
		},
		"invalid selector allows none": {
			template: cluster(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "course", Operator: "Near"}}}),
			labels:   map[string]string{"course": "databases"},
			want:     controller.NamespaceAccess{Message: `ClusterTemplate "db" allows no namespace: invalid allowedNamespaces: "Near" is not a valid label selector operator`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := controller.DecideNamespaceAccess(tc.template, "demo", tc.labels)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// clusterTemplate creates a ClusterTemplate named after the test's
// namespace (cluster-scoped names are shared by every test) and removes it
// when the test ends.
func clusterTemplate(t *testing.T, ns string, allowed *metav1.LabelSelector) *v1alpha1.ClusterTemplate {
	t.Helper()
	ct := testobj.MakeTemplate("", "ct-"+ns).Container("web").Image("example.org/code:1").Volume("home", "/home/user").Cluster()
	ct.Spec.AllowedNamespaces = allowed
	create(t, ct)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ct) })
	return ct
}

// waitNotAllowed waits until the Userland is reported as not allowed in
// its namespace, with no pod wanted.
func waitNotAllowed(t *testing.T, ns, name string) *v1alpha1.Userland {
	t.Helper()
	ul := env.WaitPhase(t, ns, name, v1alpha1.PhaseFailed)
	ready := condition(ul, v1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.ReasonNamespaceNotAllowed ||
		!strings.Contains(ready.Message, fmt.Sprintf("does not allow namespace %q (its allowedNamespaces selector is course=databases)", ns)) {
		t.Errorf("Ready = %+v, want False NamespaceNotAllowed naming the selector", ready)
	}
	return ul
}

func labelNamespace(t *testing.T, ns, key, value string) {
	t.Helper()
	var namespace corev1.Namespace
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, &namespace); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(namespace.DeepCopy())
	if namespace.Labels == nil {
		namespace.Labels = map[string]string{}
	}
	namespace.Labels[key] = value
	if err := env.Client.Patch(context.Background(), &namespace, patch); err != nil {
		t.Fatalf("labelling namespace %s: %v", ns, err)
	}
}

func deploymentReplicas(t *testing.T, ctx context.Context, ns, name string) (int32, error) {
	t.Helper()
	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
		return -1, err
	}
	return *dep.Spec.Replicas, nil
}

// TestClusterTemplateThatAppearsLaterMustAllowTheNamespace: the webhook
// admits a Userland of a missing ClusterTemplate with a warning; when the
// template appears and its allowedNamespaces excludes the namespace, the
// environment is never started and nothing is made for it.
func TestClusterTemplateThatAppearsLaterMustAllowTheNamespace(t *testing.T) {
	startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	create(t, testobj.MakeUserland(ns, "early", "alice@uni.example.ac.jp", "ct-"+ns).ClusterTemplate().Obj())
	env.WaitPhase(t, ns, "early", v1alpha1.PhasePending)

	clusterTemplate(t, ns, &metav1.LabelSelector{MatchLabels: map[string]string{"course": "databases"}})
	waitNotAllowed(t, ns, "early")
	// Stays so: a few more reconciles (a poke) change nothing.
	poke(t, ns, "early")
	waitNotAllowed(t, ns, "early")
	if _, err := deploymentReplicas(t, ctx, ns, "early"); !apierrors.IsNotFound(err) {
		t.Errorf("deployment of a Userland whose namespace is not allowed: %v, want none", err)
	}
	var claims corev1.PersistentVolumeClaimList
	if err := env.Client.List(ctx, &claims, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 0 {
		t.Errorf("%d claims made for an environment that may not run", len(claims.Items))
	}
}

// TestTighteningAllowedNamespacesStopsAndLabellingStarts: a running
// environment stops when its ClusterTemplate stops allowing the namespace,
// keeps its volume, and starts again once the namespace gets the label.
func TestTighteningAllowedNamespacesStopsAndLabellingStarts(t *testing.T) {
	startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	ct := clusterTemplate(t, ns, nil)
	create(t, testobj.MakeUserland(ns, "alice", "alice@uni.example.ac.jp", ct.Name).ClusterTemplate().Obj())
	env.WaitPhase(t, ns, "alice", v1alpha1.PhaseReady)

	patch := client.MergeFrom(ct.DeepCopy())
	ct.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"course": "databases"}}
	if err := env.Client.Patch(ctx, ct, patch); err != nil {
		t.Fatal(err)
	}
	waitNotAllowed(t, ns, "alice")
	if n, err := deploymentReplicas(t, ctx, ns, "alice"); err != nil || n != 0 {
		t.Errorf("deployment replicas %d (%v), want 0", n, err)
	}
	var claim corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice-home"}, &claim); err != nil || !claim.DeletionTimestamp.IsZero() {
		t.Errorf("the volume must be kept: %v", err)
	}

	labelNamespace(t, ns, "course", "databases")
	env.WaitPhase(t, ns, "alice", v1alpha1.PhaseReady)
	env.Eventually(t, 30*time.Second, "deployment scaled up again", func(ctx context.Context) (bool, error) {
		n, err := deploymentReplicas(t, ctx, ns, "alice")
		return n == 1, err
	})
}
