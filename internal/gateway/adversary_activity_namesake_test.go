package gateway_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/gateway/activity"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestAdversaryActivityLeavesANamesakeAlone: alice's open tab keeps
// sending use of her environment "lab" while a user manager deletes it and
// makes "lab" again for bob. The gateway authorised alice's requests for
// her Userland (by UID); the use it writes afterwards, by name, must not
// land on bob's: a write there would wake his stopped environment, or keep
// it from its idle stop, on alice's behalf. Against the real API server,
// since the UID test in the JSON patch is its to enforce.
func TestAdversaryActivityLeavesANamesakeAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	key := types.NamespacedName{Namespace: ns, Name: "lab"}
	alices, bobs := namesakes(t, key)
	// Stopped, as the controller would have written it: alice's use would
	// wake it. A patch, not an update: the package's controller may be
	// writing its status too.
	stopped := client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Stopped"}}`))
	if err := env.Client.Status().Patch(ctx, bobs, stopped); err != nil {
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

// TestAdversaryActionOnANamesakeIsRefused: alice's dashboard still shows
// her environment "lab" (the gateway's cache is behind) after it was
// deleted and made again for bob, and she presses Stop or Restart. The
// action was decided on her Userland; its patch must not suspend or
// restart bob's. Against the real API server, which refuses a patch
// whose metadata.uid is not the object's.
func TestAdversaryActionOnANamesakeIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	key := types.NamespacedName{Namespace: ns, Name: "lab"}
	alices, _ := namesakes(t, key)
	now := time.Now()
	for _, verb := range []actions.Verb{actions.Stop, actions.Restart} {
		patch, err := actions.Patch(verb, actions.Owner, alices, now)
		if err != nil {
			t.Fatal(err)
		}
		target := &v1alpha1.Userland{}
		target.Namespace, target.Name = ns, "lab"
		err = env.Client.Patch(ctx, target, patch)
		t.Logf("%s decided on alice's lab, sent to bob's: %v", verb, err)
		if err == nil {
			t.Errorf("%s decided on alice's lab was applied to bob's", verb)
		}
		// A course's bulk loop passes over exactly this refusal.
		if err != nil && !actions.Replaced(err) {
			t.Errorf("%s refusal not recognised by actions.Replaced: %v", verb, err)
		}
	}
	var got v1alpha1.Userland
	if err := env.Client.Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Suspend || got.Annotations[v1alpha1.AnnotationRestartedAt] != "" {
		t.Fatalf("bob's lab changed by alice's actions: suspend %v, annotations %v", got.Spec.Suspend, got.Annotations)
	}

	// Decided on bob's own, the same action applies.
	patch, err := actions.Patch(actions.Stop, actions.Owner, &got, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(ctx, &got, patch); err != nil {
		t.Fatal(err)
	}
	if !got.Spec.Suspend {
		t.Error("bob's own stop not applied")
	}
}

// namesakes makes alice's Userland key, deletes it, waits until it is
// gone and makes bob's under the same name: the earlier one as it was
// read, and the one that holds the name now.
func namesakes(t *testing.T, key types.NamespacedName) (alices, bobs *v1alpha1.Userland) {
	t.Helper()
	ctx := context.Background()
	alices = testobj.MakeUserland(key.Namespace, key.Name, "alice", "web").Obj()
	if err := env.Client.Create(ctx, alices); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, alices); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "alice's "+key.Name+" gone", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, key, &v1alpha1.Userland{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	bobs = testobj.MakeUserland(key.Namespace, key.Name, "bob", "web").Obj()
	if err := env.Client.Create(ctx, bobs); err != nil {
		t.Fatal(err)
	}
	return alices, bobs
}
