package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestBudgetOnTheDashboard: a student sees their usage and what is left
// on their home page; staff see every student's on the course page, by
// usage and as CSV. Granting hours is RBAC's: bob, listed as staff with
// no role, is not offered the button and his forged grant is refused;
// carol, bound to userland-budget-granter, grants, and the student sees
// the hours.
func TestBudgetOnTheDashboard(t *testing.T) {
	t.Parallel()
	f := setup(t, func(s *gateway.Server) {
		s.Dashboard.RBACNames = gateway.Options{RBACUserPrefix: "idp:", RBACGroupPrefix: "idp:"}.RBACNames()
	})
	ctx := context.Background()
	lab := testobj.MakeTemplate(f.ns, "lab").Container("web").Idle(5 * time.Minute).Obj()
	crs := testobj.MakeCourse(f.ns, "db").Students("alice").Staff("bob", "carol").Template("lab", v1alpha1.ProvisionUpFront).Obj()
	crs.Spec.Limits.Budget = &v1alpha1.BudgetSpec{Hours: 10, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	for _, o := range []client.Object{lab, crs} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	name := courseEnv("db", "alice")
	env.Eventually(t, 60*time.Second, "alice's course environment with its usage", func(ctx context.Context) (bool, error) {
		var ul v1alpha1.Userland
		err := f.server.Reader.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &ul)
		return err == nil && ul.Status.Usage != nil, nil
	})

	alice := browser(t)
	signIn(t, alice, f.gateway.URL, "alice", "alice-pw")
	if _, home := get(t, alice, f.gateway.URL+"/", nil); !strings.Contains(home, "Compute hours") || !strings.Contains(home, "0m used of 10h, 10h left") {
		t.Errorf("alice's home page does not show her usage:\n%s", home)
	}

	page := fmt.Sprintf("%s/dashboard/course?namespace=%s&name=db", f.gateway.URL, f.ns)
	bob := browser(t)
	signIn(t, bob, f.gateway.URL, "bob", "bob-pw")
	_, body := get(t, bob, page, nil)
	if !strings.Contains(body, "0m used of 10h, 10h left") || !strings.Contains(body, `id="usage-csv"`) {
		t.Errorf("the course page does not show the students' usage:\n%s", body)
	}
	if strings.Contains(body, "Grant hours") {
		t.Error("bob, listed as staff without the grant verb, is offered Grant hours")
	}
	token := formToken.FindStringSubmatch(body)[1]
	if resp, msg := postGrant(t, f, bob, token, name, "5"); resp.StatusCode != http.StatusForbidden || !strings.Contains(msg, "verb grant") {
		t.Errorf("bob's forged grant: %s %q, want 403 naming the verb", resp.Status, msg)
	}

	granter := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "granter-carol"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-budget-granter"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "idp:carol"}},
	}
	if err := env.Client.Create(ctx, granter); err != nil {
		t.Fatal(err)
	}
	carol := browser(t)
	signIn(t, carol, f.gateway.URL, "carol", "carol-pw")
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, body = get(t, carol, page, nil)
		return strings.Contains(body, "Grant hours"), nil
	})
	if err != nil {
		t.Fatalf("carol, a granter, is never offered Grant hours:\n%s", body)
	}
	token = formToken.FindStringSubmatch(body)[1]
	if resp, msg := postGrant(t, f, carol, token, name, "2"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("carol's grant: %s %q, want 303", resp.Status, msg)
	}
	env.Eventually(t, 30*time.Second, "the grant in alice's usage", func(ctx context.Context) (bool, error) {
		ul, err := getUserland(ctx, f.ns, name)
		return err == nil && ul.Status.Usage != nil && ul.Status.Usage.GrantedSeconds == 7200 && ul.Status.Usage.GrantedBy == "carol", nil
	})
	ul, _ := getUserland(ctx, f.ns, name)
	if g, err := budget.ParseGrant(ul.Annotations[v1alpha1.AnnotationBudgetGrant]); err != nil || g.Hours != 2 || g.By != "carol" {
		t.Errorf("the grant written: %+v (%v), want 2 hours by carol", g, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, body = get(t, alice, f.gateway.URL+"/", nil)
		return strings.Contains(body, "0m used of 12h, 12h left"), nil
	})
	if err != nil {
		t.Errorf("alice's home page does not show the granted hours:\n%s", body)
	}

	resp, csv := get(t, carol, page+"&sort=usage&format=csv", nil)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") ||
		!strings.HasPrefix(csv, "user,role,environment,template,phase,used_hours,remaining_hours\n") || !strings.Contains(csv, "alice,student,") ||
		!strings.Contains(csv, ",0.00,12.00") {
		t.Errorf("usage CSV (%s):\n%s", ct, csv)
	}
}

func postGrant(t *testing.T, f fixture, c *http.Client, token, userland, hours string) (*http.Response, string) {
	t.Helper()
	form := url.Values{"csrf": {token}, "namespace": {f.ns}, "name": {"db"}, "action": {"grant"}, "userland": {userland}, "hours": {hours}}
	req, _ := http.NewRequest(http.MethodPost, f.gateway.URL+"/dashboard/course", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	return resp, body.String()
}

func getUserland(ctx context.Context, ns, name string) (*v1alpha1.Userland, error) {
	var ul v1alpha1.Userland
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ul)
	return &ul, err
}
