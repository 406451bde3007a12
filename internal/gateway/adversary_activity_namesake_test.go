package gateway_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway/activity"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestAdversaryActivityLeavesANamesakeAlone: alice's open tab keeps
// sending use of her environment "lab" while a user manager deletes it and
// makes "lab" again for bob. The gateway authorised alice's requests for
// her Userland (by UID); the use it writes afterwards, by name, must not
// land on bob's: a write there would wake his stopped environment, or keep
// it from its idle stop, on alice's behalf. Against the real API server,
// since the UID precondition in the merge patch is its to enforce.
func TestAdversaryActivityLeavesANamesakeAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	key := types.NamespacedName{Namespace: ns, Name: "lab"}
	alices := testobj.MakeUserland(ns, "lab", "alice", "web").Obj()
	if err := env.Client.Create(ctx, alices); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, alices); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "alice's lab gone", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, key, &v1alpha1.Userland{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	bobs := testobj.MakeUserland(ns, "lab", "bob", "web").Obj()
	if err := env.Client.Create(ctx, bobs); err != nil {
		t.Fatal(err)
	}
	// Stopped, as the controller would have written it: alice's use would
	// wake it.
	bobs.Status.Phase = v1alpha1.PhaseStopped
	if err := env.Client.Status().Update(ctx, bobs); err != nil {
		t.Fatal(err)
	}

	rec := &activity.Recorder{Client: env.Client, Interval: time.Minute}
	if err := rec.Wake(ctx, key, alices.UID); err != nil {
		t.Errorf("waking alice's gone lab: %v, want nil (nothing to record)", err)
	}
	if err := rec.KeepRunning(ctx, key, alices.UID); err != nil {
		t.Errorf("keeping alice's gone lab running: %v, want nil", err)
	}
	rec.Touch(key, alices.UID, v1alpha1.ActivityWebSocket)
	rec.Flush(ctx)
	var got v1alpha1.Userland
	if err := env.Client.Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.LastActivityTime != nil {
		t.Fatalf("bob's lab got alice's use: lastActivityTime %v (%s)", got.Status.LastActivityTime, got.Status.LastActivitySource)
	}

	// The same writes with bob's UID land: the precondition holds for the
	// Userland the use was authorised for.
	if err := rec.Wake(ctx, key, bobs.UID); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.LastActivityTime == nil || got.Status.LastActivitySource != v1alpha1.ActivityRequest {
		t.Fatalf("bob's own wake not recorded: %+v", got.Status)
	}
}
