package gateway_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/apiverdict"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestSignInProvisionsPastANamespaceBeingDeleted: a template (or course)
// whose namespace is being deleted offers nothing, and neither fails the
// sign-in's provisioning nor stops the environments it offers elsewhere
// (CI met this: another test's namespace, terminating, listed carol).
func TestSignInProvisionsPastANamespaceBeingDeleted(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	const domain = "terminating.example.ac.jp"
	going := env.Namespace(t)
	// A finalizer holds the namespace in Terminating for the whole test,
	// whether or not a namespace controller runs.
	hold := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: going, Name: "hold", Finalizers: []string{"userland.dev/test-hold"}}}
	live := testobj.MakeTemplate(f.ns, "lab").Container("web").AutoProvision(domain).Obj()
	dying := testobj.MakeTemplate(going, "lab").Container("web").AutoProvision(domain).Obj()
	for _, o := range []client.Object{hold, live, dying} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = env.Client.Patch(ctx, hold, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)))
	})
	f.waitCached(t, live, dying)
	if err := env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: going}}); err != nil {
		t.Fatal(err)
	}

	id := session.Identity{User: "terminating-only", Email: "terminating-only@" + domain}
	n, err := f.server.Provisioner.Provision(ctx, id)
	if err != nil || n != 1 {
		t.Fatalf("provisioning past a terminating namespace: %d created, %v; want 1 and no error", n, err)
	}
	var got v1alpha1.UserlandList
	if err := env.Client.List(ctx, &got, client.MatchingLabels{"userland.dev/auto-provisioned": "true"}); err != nil {
		t.Fatal(err)
	}
	var where []string
	for _, ul := range got.Items {
		if ul.Spec.User == "terminating-only" {
			where = append(where, ul.Namespace+"/"+ul.Name)
		}
	}
	if diff := cmp.Diff([]string{f.ns + "/terminating-only-lab"}, where); diff != "" {
		t.Errorf("the user's environments (-want +got):\n%s", diff)
	}

	// Asked for by name (the dashboard's Create), the dying namespace's
	// offer is refused with the reason the dashboard names, not a
	// success that created nothing.
	candidates, err := f.server.Provisioner.Candidates(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range candidates {
		if c.Namespace != going {
			continue
		}
		created, err := f.server.Provisioner.Create(ctx, id, c)
		if created || !apiverdict.NamespaceTerminating(err) {
			t.Errorf("creating in the namespace being deleted: created %v, %v; want a NamespaceTerminating refusal", created, err)
		}
		return
	}
	t.Errorf("no candidate from the namespace being deleted among %v", candidates)
}
