package gateway_test

import (
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
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestAdversaryDashboardGrantsStayWhereRBACSays: the gateway holds grant
// on every course, so its form is the only gate. carol is staff of two
// courses but RBAC lets her grant in db only (a Role with resourceNames):
// she cannot reach os's student by naming os, by naming db with os's
// environment, with hours out of range, or without the form's token; the
// student alice cannot grant herself anything; and what carol's own
// grant records is carol, whatever the form says.
func TestAdversaryDashboardGrantsStayWhereRBACSays(t *testing.T) {
	t.Parallel()
	f := setup(t, func(s *gateway.Server) {
		s.Dashboard.RBACNames = gateway.Options{RBACUserPrefix: "idp:", RBACGroupPrefix: "idp:"}.RBACNames()
	})
	ctx := context.Background()
	lab := testobj.MakeTemplate(f.ns, "lab").Container("web").Idle(5 * time.Minute).Obj()
	week := &v1alpha1.BudgetSpec{Hours: 10, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	db := testobj.MakeCourse(f.ns, "db").Students("alice").Staff("carol").Template("lab", v1alpha1.ProvisionUpFront).Obj()
	db.Spec.Limits.Budget = week
	os := testobj.MakeCourse(f.ns, "os").Students("bob").Staff("carol").Template("lab", v1alpha1.ProvisionUpFront).Obj()
	os.Spec.Limits.Budget = week.DeepCopy()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "grant-db"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"courses"},
			ResourceNames: []string{"db"}, Verbs: []string{v1alpha1.VerbGrant}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "grant-db-carol"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "grant-db"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "idp:carol"}},
	}
	for _, o := range []client.Object{lab, db, os, role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	alicesEnv, bobsEnv := courseEnv("db", "alice"), courseEnv("os", "bob")
	for _, name := range []string{alicesEnv, bobsEnv} {
		env.Eventually(t, 60*time.Second, name+" with its usage", func(ctx context.Context) (bool, error) {
			var ul v1alpha1.Userland
			err := f.server.Reader.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &ul)
			return err == nil && ul.Status.Usage != nil, nil
		})
	}

	carol := browser(t)
	signIn(t, carol, f.gateway.URL, "carol", "carol-pw")
	page := func(course string) string {
		return fmt.Sprintf("%s/dashboard/course?namespace=%s&name=%s", f.gateway.URL, f.ns, course)
	}
	var body string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, body = get(t, carol, page("db"), nil)
		return strings.Contains(body, "Grant hours"), nil
	}); err != nil {
		t.Fatalf("carol is never offered Grant hours in db:\n%s", body)
	}
	dbToken := formToken.FindStringSubmatch(body)[1]
	_, osBody := get(t, carol, page("os"), nil)
	if strings.Contains(osBody, "Grant hours") {
		t.Error("carol is offered Grant hours in os, where RBAC does not let her grant")
	}
	osToken := formToken.FindStringSubmatch(osBody)[1]

	post := func(c *http.Client, form url.Values) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, f.gateway.URL+"/dashboard/course", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		buf := new(strings.Builder)
		_, _ = fmt.Fprint(buf, resp.Status)
		return resp.StatusCode, buf.String()
	}
	form := func(token, course, userland, hours string, extra ...string) url.Values {
		v := url.Values{"csrf": {token}, "namespace": {f.ns}, "name": {course}, "action": {"grant"}, "userland": {userland}, "hours": {hours}}
		for i := 0; i+1 < len(extra); i += 2 {
			v.Set(extra[i], extra[i+1])
		}
		return v
	}
	alice := browser(t)
	signIn(t, alice, f.gateway.URL, "alice", "alice-pw")
	_, home := get(t, alice, f.gateway.URL+"/", nil)
	aliceToken := ""
	if m := formToken.FindStringSubmatch(home); m != nil {
		aliceToken = m[1]
	}
	attacks := []struct {
		name string
		c    *http.Client
		form url.Values
	}{
		{"carol names os, whose grant RBAC refuses her", carol, form(osToken, "os", bobsEnv, "5")},
		{"carol names db but os's student's environment", carol, form(dbToken, "db", bobsEnv, "5")},
		{"carol names db with a namespace-qualified or path-like environment", carol, form(dbToken, "db", "../"+bobsEnv, "5")},
		{"carol asks 101 hours", carol, form(dbToken, "db", alicesEnv, "101")},
		{"carol asks -5 hours", carol, form(dbToken, "db", alicesEnv, "-5")},
		{"carol without the form token (cross-site)", carol, form("", "db", alicesEnv, "5")},
		{"carol with a token from another session", carol, form(aliceToken, "db", alicesEnv, "5")},
		{"alice grants herself", alice, form(aliceToken, "db", alicesEnv, "5")},
	}
	for _, at := range attacks {
		if code, status := post(at.c, at.form); code == http.StatusSeeOther {
			t.Errorf("%s: %s", at.name, status)
		} else {
			t.Logf("held: %s: %s", at.name, status)
		}
	}
	for _, name := range []string{alicesEnv, bobsEnv} {
		ul, err := getUserland(ctx, f.ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if g := ul.Annotations[v1alpha1.AnnotationBudgetGrant]; g != "" {
			t.Errorf("HOLE: %s carries grant %q after the refused attempts", name, g)
		}
	}

	// Control, and the byline: carol's real grant, with a forged "by" in
	// the form, records carol.
	if code, status := post(carol, form(dbToken, "db", alicesEnv, "2", "by", "dean", "user", "dean")); code != http.StatusSeeOther {
		t.Fatalf("carol's grant in db: %s", status)
	}
	ul, err := getUserland(ctx, f.ns, alicesEnv)
	if err != nil {
		t.Fatal(err)
	}
	if g := ul.Annotations[v1alpha1.AnnotationBudgetGrant]; !strings.HasSuffix(g, "=2;carol") {
		t.Errorf("carol's grant recorded as %q, want 2 hours by carol", g)
	}
}
