package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// TestAdversaryStaffListOtherStaffsEnvironments: bob is listed as staff of
// course db. He may not reach carol's (another staff member's) course
// environment, and the course page hides it ("staff learn nothing of one
// they cannot reach"). The dashboard's progress feed, /dashboard/status
// with all=1, lists every Userland carrying the course's label to any
// listed staff member (courseStaff.of checks IsStaff only, not
// course.StaffMayReach): carol's environment, its address, phase and last
// activity.
func TestAdversaryStaffListOtherStaffsEnvironments(t *testing.T) {
	t.Parallel()
	f := setupCourse(t)
	var carols string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var list v1alpha1.UserlandList
		if err := env.Client.List(ctx, &list, client.InNamespace(f.ns), client.MatchingLabels{v1alpha1.LabelCourse: "db"}); err != nil {
			return false, nil
		}
		for _, ul := range list.Items {
			if ul.Spec.User == "carol" {
				carols = ul.Name
			}
		}
		return carols != "", nil
	})
	if err != nil {
		t.Fatalf("carol's course environment never appeared: %v", err)
	}
	bob := browser(t)
	signIn(t, bob, f.gateway.URL, "bob", "bob-pw")
	var leaked bool
	_ = wait.PollUntilContextTimeout(context.Background(), 300*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		resp, body := get(t, bob, f.gateway.URL+"/dashboard/status?all=1", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status feed: %s", resp.Status)
		}
		var entries []struct{ Namespace, Name, URL, Phase string }
		if err := json.Unmarshal([]byte(body), &entries); err != nil {
			t.Fatalf("status feed: %v\n%s", err, body)
		}
		for _, e := range entries {
			if e.Namespace == f.ns && e.Name == carols {
				t.Logf("bob sees %+v", e)
				leaked = true
			}
		}
		return leaked, nil
	})
	if leaked {
		t.Errorf("HOLE: bob (staff) learns of carol's (staff) environment %s through /dashboard/status?all=1", carols)
	}
}
