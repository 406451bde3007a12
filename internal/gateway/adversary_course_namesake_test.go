package gateway_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// staleUserlands is the gateway's cache behind the API server: it lists
// one Userland as it was before it was deleted and made again under its
// name (the same name, another UID).
type staleUserlands struct {
	client.Reader
	stale types.NamespacedName
}

func (s staleUserlands) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := s.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	if uls, ok := list.(*v1alpha1.UserlandList); ok {
		for i := range uls.Items {
			if client.ObjectKeyFromObject(&uls.Items[i]) == s.stale {
				uls.Items[i].UID = "uid-of-the-deleted-one"
			}
		}
	}
	return nil
}

// TestAdversaryCourseStopAllPassesOverANamesake: the course manager
// presses "Stop all" while the gateway's cache still shows alice's course
// environment as it was before its name was taken again. The API server
// refuses that one patch (it names the old UID); the rest of the class
// must still stop, the page must say how many, and the newcomer under
// alice's old name must be left as it is.
func TestAdversaryCourseStopAllPassesOverANamesake(t *testing.T) {
	t.Parallel()
	f := setupCourse(t)
	bindCourseManager(t, f.ns, "idp:carol")
	ctx := context.Background()
	students := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"students":{"users":["alice","dave"]}}}`))
	if err := env.Client.Patch(ctx, f.course.DeepCopy(), students); err != nil {
		t.Fatal(err)
	}
	byUser := map[string]types.NamespacedName{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var list v1alpha1.UserlandList
		if err := f.server.Reader.List(ctx, &list, client.InNamespace(f.ns), client.MatchingLabels{v1alpha1.LabelCourse: "db"}); err != nil {
			return false, err
		}
		for i := range list.Items {
			byUser[list.Items[i].Spec.User] = client.ObjectKeyFromObject(&list.Items[i])
		}
		return byUser["alice"].Name != "" && byUser["dave"].Name != "", nil
	})
	if err != nil {
		t.Fatalf("the course's environments never reached the gateway's cache: %v", byUser)
	}
	f.server.Dashboard.Reader = staleUserlands{Reader: f.server.Dashboard.Reader, stale: byUser["alice"]}

	carol := browser(t)
	signIn(t, carol, f.gateway.URL, "carol", "carol-pw")
	var page, token string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		page, token = f.coursePage(t, carol)
		return strings.Contains(page, `id="stop-all"`), nil
	})
	if err != nil {
		t.Fatalf("Stop all never appeared for the course manager:\n%s", page)
	}
	resp, _ := f.postCourse(t, carol, token, "stop", "")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("stop all: %s, want 303", resp.Status)
	}
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Query(); got.Get("error") != "" || got.Get("flash") != "Stopping 1 student environments." {
		t.Errorf("stop all with one stale entry: flash %q, error %q; want one stopped and no error", got.Get("flash"), got.Get("error"))
	}
	if !suspended(t, f.ns, byUser["dave"].Name) {
		t.Error("dave's course environment was not stopped")
	}
	if suspended(t, f.ns, byUser["alice"].Name) {
		t.Error("the Userland under the stale entry's name was stopped")
	}
}
