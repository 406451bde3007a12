package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// TestServicePointedElsewhereIsPutBack: someone who may patch Services
// points alice's environment's Service at bob's pod (its applied-hash
// annotation untouched). The gateway sends alice wherever that Service's
// EndpointSlices say, so the controller puts the selector back at once,
// rather than trusting the annotation.
func TestServicePointedElsewhereIsPutBack(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	create(t, template(ns, "t", "example.org/app:1"), userland(ns, "alice", "alice", "t"), userland(ns, "bob", "bob", "t"))
	env.WaitPhase(t, ns, "alice", v1alpha1.PhaseReady)
	env.WaitPhase(t, ns, "bob", v1alpha1.PhaseReady)
	key := client.ObjectKey{Namespace: ns, Name: "alice"}
	var svc corev1.Service
	if err := env.Client.Get(ctx, key, &svc); err != nil {
		t.Fatal(err)
	}
	want := svc.Spec.Selector
	patch := []byte(`{"spec":{"selector":{"` + v1alpha1.LabelUserland + `":"bob"}}}`)
	if err := env.Client.Patch(ctx, &svc, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	env.Eventually(t, time.Minute, "alice's Service selects alice's pod again", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, key, &svc); err != nil {
			return false, err
		}
		return cmp.Equal(want, svc.Spec.Selector), nil
	})
	t.Logf("selector put back %v after the patch", time.Since(start))
	alice, err := get(t, ctx, ns, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{v1alpha1.LabelUserland: "alice", v1alpha1.LabelUserlandUID: string(alice.UID)}, svc.Spec.Selector); diff != "" {
		t.Errorf("selector (-want +got):\n%s", diff)
	}
}
