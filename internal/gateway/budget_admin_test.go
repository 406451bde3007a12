package gateway_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
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

// TestGrantOutsideACourseOnTheAdminPage: an environment outside a course
// has its template's budget; the admin page shows its use and offers
// "Grant hours" only to someone RBAC lets grant on that Userland. Being
// an admin of the gateway is not enough (root's forged grant is refused
// until a RoleBinding gives him the verb), nor is owning the environment
// (alice cannot grant herself hours).
func TestGrantOutsideACourseOnTheAdminPage(t *testing.T) {
	t.Parallel()
	f := setup(t, func(s *gateway.Server) {
		s.Dashboard.RBACNames = gateway.Options{RBACUserPrefix: "idp:", RBACGroupPrefix: "idp:"}.RBACNames()
	})
	ctx := context.Background()
	metered := testobj.MakeTemplate(f.ns, "metered").Container("web").Idle(5 * time.Minute).Obj()
	metered.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 1, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	for _, o := range []client.Object{metered, testobj.MakeUserland(f.ns, "alice-metered", "alice", "metered").Obj()} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	env.Eventually(t, 60*time.Second, "alice's metered environment with its usage", func(ctx context.Context) (bool, error) {
		var ul v1alpha1.Userland
		err := f.server.Reader.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "alice-metered"}, &ul)
		return err == nil && ul.Status.Usage != nil, nil
	})
	page := f.gateway.URL + "/dashboard/admin?namespace=" + f.ns + "&template=metered"

	root := browser(t)
	signIn(t, root, f.gateway.URL, "root", "root-pw")
	_, body := get(t, root, page, nil)
	if !strings.Contains(body, "used of 1h") {
		t.Fatalf("the admin page does not show the environment's use:\n%s", body)
	}
	if strings.Contains(body, "Grant hours") {
		t.Error("root, an admin without the grant verb, is offered Grant hours")
	}
	token := formToken.FindStringSubmatch(body)[1]
	if loc := postAdminGrant(t, f, root, token, "alice-metered", "5"); !strings.Contains(loc, "error=") || !strings.Contains(loc, "verb+grant") {
		t.Errorf("root's forged grant went to %q, want an error naming the verb grant", loc)
	}

	alice := browser(t)
	signIn(t, alice, f.gateway.URL, "alice", "alice-pw")
	_, home := get(t, alice, f.gateway.URL+"/", nil)
	if !strings.Contains(home, "used of 1h") {
		t.Errorf("alice's home page does not show her environment's use:\n%s", home)
	}
	token = formToken.FindStringSubmatch(home)[1]
	if loc := postAdminGrant(t, f, alice, token, "alice-metered", "5"); !strings.Contains(loc, "error=") {
		t.Errorf("alice's grant to herself went to %q, want an error", loc)
	}
	if ul, err := getUserland(ctx, f.ns, "alice-metered"); err != nil || ul.Annotations[v1alpha1.AnnotationBudgetGrant] != "" {
		t.Fatalf("after the refused grants the annotation is %q (%v), want none", ul.Annotations[v1alpha1.AnnotationBudgetGrant], err)
	}

	granter := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "granter-root"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-budget-granter"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "idp:root"}},
	}
	if err := env.Client.Create(ctx, granter); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, body = get(t, root, page, nil)
		return strings.Contains(body, "Grant hours"), nil
	})
	if err != nil {
		t.Fatalf("root, now a granter, is never offered Grant hours:\n%s", body)
	}
	token = formToken.FindStringSubmatch(body)[1]
	if loc := postAdminGrant(t, f, root, token, "alice-metered", "2"); !strings.Contains(loc, "flash=") {
		t.Fatalf("root's grant went to %q, want a flash", loc)
	}
	env.Eventually(t, 30*time.Second, "the grant in alice's usage", func(ctx context.Context) (bool, error) {
		ul, err := getUserland(ctx, f.ns, "alice-metered")
		return err == nil && ul.Status.Usage != nil && ul.Status.Usage.GrantedSeconds == 7200 && ul.Status.Usage.GrantedBy == "root", nil
	})
	ul, _ := getUserland(ctx, f.ns, "alice-metered")
	if g, err := budget.ParseGrant(ul.Annotations[v1alpha1.AnnotationBudgetGrant]); err != nil || g.Hours != 2 || g.By != "root" {
		t.Errorf("the grant written: %+v (%v), want 2 hours by root", g, err)
	}
	// The page reads the gateway's cache, which may show the usage a
	// moment after the API server does.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, body = get(t, root, page, nil)
		return strings.Contains(body, "used of 3h"), nil
	})
	if err != nil {
		t.Errorf("the admin page does not show the granted hours:\n%s", body)
	}

	// The same form sent again (a double click, a resubmission: it says
	// the page showed no grant) is not added on top of the first.
	if loc := postAdminGrant(t, f, root, token, "alice-metered", "2"); !strings.Contains(loc, "error=") || !strings.Contains(loc, "since+the+page+was+shown") {
		t.Errorf("the same grant form sent twice went to %q, want an error saying hours were granted since the page was shown", loc)
	}
	if ul, _ := getUserland(ctx, f.ns, "alice-metered"); mustGrant(t, ul).Hours != 2 {
		t.Errorf("after the second press the grant is %q, want still 2 hours", ul.Annotations[v1alpha1.AnnotationBudgetGrant])
	}
	// The form of the page as it is now adds to what it shows.
	seen := grantedField.FindStringSubmatch(body)
	if seen == nil || seen[1] == "" {
		t.Fatalf("the admin page's grant form does not carry the grant it shows:\n%s", body)
	}
	if loc := postAdminGrantSeen(t, f, root, formToken.FindStringSubmatch(body)[1], "alice-metered", "1", html.UnescapeString(seen[1])); !strings.Contains(loc, "flash=") {
		t.Fatalf("a grant from the page as it is went to %q, want a flash", loc)
	}
	if ul, _ := getUserland(ctx, f.ns, "alice-metered"); mustGrant(t, ul).Hours != 3 {
		t.Errorf("after a grant of 1 more hour the grant is %q, want 3 hours", ul.Annotations[v1alpha1.AnnotationBudgetGrant])
	}
}

// grantedField is a grant form's record of the grant its page showed.
var grantedField = regexp.MustCompile(`name="granted" value="([^"]*)"`)

func ulGrant(ul *v1alpha1.Userland) string { return ul.Annotations[v1alpha1.AnnotationBudgetGrant] }

func mustGrant(t *testing.T, ul *v1alpha1.Userland) budget.Grant {
	t.Helper()
	g, err := budget.ParseGrant(ulGrant(ul))
	if err != nil {
		t.Fatalf("the grant annotation %q: %v", ulGrant(ul), err)
	}
	return g
}

// postAdminGrant posts the admin page's grant form and returns where the
// gateway redirected.
func postAdminGrant(t *testing.T, f fixture, c *http.Client, token, name, hours string) string {
	t.Helper()
	return postAdminGrantSeen(t, f, c, token, name, hours, "")
}

// postAdminGrantSeen is postAdminGrant from a page that showed the grant
// seen.
func postAdminGrantSeen(t *testing.T, f fixture, c *http.Client, token, name, hours, seen string) string {
	t.Helper()
	form := url.Values{"csrf": {token}, "rd": {"/dashboard/admin"}, "namespace": {f.ns}, "name": {name}, "action": {"grant"}, "hours": {hours}, "granted": {seen}}
	req, _ := http.NewRequest(http.MethodPost, f.gateway.URL+"/dashboard/action", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("grant: %s, want 303", resp.Status)
	}
	return resp.Header.Get("Location")
}
