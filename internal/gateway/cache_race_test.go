package gateway_test

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestSignInAndActionsLeaveTheCacheAlone: the gateway's cache hands out
// its own objects (deep copies are off, as the manager sets it), so
// whatever the gateway writes must be built on a copy. Sign-ins that
// provision (and, before courses stopped adopting environments, relabel
// an existing one) and dashboard actions run here while home pages and
// the status feed are read in a loop: a write into a cached object (its
// label map, a Patch answer decoded into it) races those reads, and a
// concurrent map read and write kills the process. Run it with -race,
// which reports the unsynchronised write even when nothing crashes.
func TestSignInAndActionsLeaveTheCacheAlone(t *testing.T) {
	f := setup(t, nil)
	ctx := context.Background()
	intro := testobj.MakeCourse(f.ns, "intro").Students("alice").Template("web", v1alpha1.ProvisionOnSignIn).Obj()
	if err := env.Client.Create(ctx, intro); err != nil {
		t.Fatal(err)
	}
	f.waitCached(t, intro)
	key := types.NamespacedName{Namespace: f.ns, Name: "alice"}
	// Labelled, as auto-provisioned and imported environments are: the
	// cached object then has a label map that a careless write would share.
	labelled := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"userland.dev/auto-provisioned":"true"},"annotations":{"example.edu/cohort":"2026"}}}`))
	if err := env.Client.Patch(ctx, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}, labelled); err != nil {
		t.Fatal(err)
	}

	// alice reads her home page (her row: conditions, labels) and status
	// feed, bob his home page (every Userland's course label, to see
	// whether he is staff).
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for _, read := range []struct{ user, path string }{{"alice", "/"}, {"alice", "/dashboard/status"}, {"bob", "/"}} {
		c := browser(t)
		signIn(t, c, f.gateway.URL, read.user, read.user+"-pw")
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := c.Get(f.gateway.URL + read.path)
				if err != nil {
					t.Errorf("%s as %s: %v", read.path, read.user, err)
					return
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("%s as %s: %s", read.path, read.user, resp.Status)
					return
				}
			}
		})
	}
	defer func() {
		close(stop)
		readers.Wait()
	}()

	alice := browser(t)
	token := dashboardToken(t, alice, f, "alice", "alice-pw")
	for round := range 5 {
		// alice's environment is outside the course, as if made before it.
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"userland.dev/course":null}}}`))
		if err := env.Client.Patch(ctx, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}, patch); err != nil {
			t.Fatal(err)
		}
		// Her sign-ins provision what the course gives her.
		signIn(t, browser(t), f.gateway.URL, "alice", "alice-pw")
		// Her dashboard stops and starts her environment.
		for _, action := range []string{"stop", "start", "keep-running"} {
			form := url.Values{"action": {action}, "namespace": {f.ns}, "name": {"alice"}, "csrf": {token}, "rd": {"/"}}
			if resp := postAction(t, alice, f, form, nil); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("round %d, %s: %s", round, action, resp.Status)
			}
		}
	}
}
