package gateway_test

import (
	"context"
	"fmt"
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
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/testobj"
)

// advPost posts form to /dashboard/action as c and returns the status and
// where it redirected (no redirect followed).
func advPost(t *testing.T, f fixture, c *http.Client, form url.Values) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.gateway.URL+"/dashboard/action", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

func advGrantForm(token, ns, name, hours string) url.Values {
	return url.Values{"csrf": {token}, "rd": {"/dashboard/admin"}, "namespace": {ns}, "name": {name}, "action": {"grant"}, "hours": {hours}}
}

// advRow is the admin page's row for one environment.
func advRow(body, ns, name string) string {
	re := regexp.MustCompile(`(?s)<tr class="env" data-namespace="` + regexp.QuoteMeta(ns) + `" data-name="` + regexp.QuoteMeta(name) + `">.*?</tr>`)
	return re.FindString(body)
}

func advGrantAnnotation(t *testing.T, ns, name string) string {
	t.Helper()
	ul, err := getUserland(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return ul.Annotations[v1alpha1.AnnotationBudgetGrant]
}

// TestAdversaryPoolAdminGrant attacks the admin page's "Grant hours":
//   - existence oracle: a student's grant on someone else's environment,
//     on one in a namespace that does not hold it, and on a name nobody
//     has must all get the same answer;
//   - CSRF: no token, or another person's token, changes nothing;
//   - a person RBAC lets grant on a course environment's Userland (a Role
//     with grant on userlands, resourceNames the course environment) but
//     not on its course must not grant through the admin action (the
//     gateway's own role has grant on courses, so the webhook would pass
//     its write);
//   - resourceNames: grant on one Userland is not grant on another;
//   - hours out of bounds, and a forged "by" field, change nothing / are
//     recorded as the signed-in person.
func TestAdversaryPoolAdminGrant(t *testing.T) {
	t.Parallel()
	f := setup(t, func(s *gateway.Server) {
		s.Dashboard.RBACNames = gateway.Options{RBACUserPrefix: "idp:", RBACGroupPrefix: "idp:"}.RBACNames()
	})
	ctx := context.Background()
	metered := testobj.MakeTemplate(f.ns, "metered").Container("web").Idle(5 * time.Minute).Obj()
	metered.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 1, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	lab := testobj.MakeTemplate(f.ns, "lab").Container("web").Idle(5 * time.Minute).Obj()
	crs := testobj.MakeCourse(f.ns, "db").Students("alice", "bob").Template("lab", v1alpha1.ProvisionUpFront).Obj()
	crs.Spec.Limits.Budget = &v1alpha1.BudgetSpec{Hours: 10, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	for _, o := range []client.Object{metered, lab, crs,
		testobj.MakeUserland(f.ns, "alice-metered", "alice", "metered").Obj(),
		testobj.MakeUserland(f.ns, "bob-metered", "bob", "metered").Obj()} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	aliceCourse, bobCourse := courseEnv("db", "alice"), courseEnv("db", "bob")
	for _, name := range []string{"alice-metered", "bob-metered", aliceCourse, bobCourse} {
		env.Eventually(t, 90*time.Second, name+" with its usage in the gateway's cache", func(ctx context.Context) (bool, error) {
			var ul v1alpha1.Userland
			err := f.server.Reader.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &ul)
			return err == nil && ul.Status.Usage != nil, nil
		})
	}

	// 1. Existence oracle, as a student with no grant verb.
	alice := browser(t)
	signIn(t, alice, f.gateway.URL, "alice", "alice-pw")
	_, home := get(t, alice, f.gateway.URL+"/", nil)
	aliceToken := formToken.FindStringSubmatch(home)[1]
	answers := map[string]string{}
	for _, target := range []struct{ what, ns, name string }{
		{"bob's environment outside a course", f.ns, "bob-metered"},
		{"bob's course environment", f.ns, bobCourse},
		{"a name nobody has", f.ns, "nobody-has-this"},
		{"bob's environment's name in another namespace", "default", "bob-metered"},
	} {
		code, loc := advPost(t, f, alice, advGrantForm(aliceToken, target.ns, target.name, "5"))
		if code != http.StatusSeeOther {
			t.Errorf("alice's grant on %s: %d, want 303", target.what, code)
		}
		answers[target.what] = loc
	}
	var first string
	for what, loc := range answers {
		if first == "" {
			first = loc
		}
		if loc != first {
			t.Errorf("existence oracle: alice's grant answers differ: %q for %s, %v in all", loc, what, answers)
			break
		}
		if !strings.Contains(loc, "error=") {
			t.Errorf("alice's grant on %s went to %q, want an error", what, loc)
		}
	}
	for _, name := range []string{"bob-metered", bobCourse} {
		if a := advGrantAnnotation(t, f.ns, name); a != "" {
			t.Errorf("after alice's attempts %s carries grant %q", name, a)
		}
	}

	// 2. RBAC grant on userlands, resourceNames alice-metered and alice's
	// course environment, for root (an admin of the gateway). No grant on
	// the course.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "adv-grant-some-userlands"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"userlands"},
			Verbs: []string{v1alpha1.VerbGrant}, ResourceNames: []string{"alice-metered", aliceCourse}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "adv-grant-some-userlands"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "idp:root"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	root := browser(t)
	signIn(t, root, f.gateway.URL, "root", "root-pw")
	page := f.gateway.URL + "/dashboard/admin?namespace=" + f.ns
	var body string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, body = get(t, root, page, nil)
		return strings.Contains(advRow(body, f.ns, "alice-metered"), "Grant hours"), nil
	})
	if err != nil {
		t.Fatalf("root, allowed grant on alice-metered, is never offered Grant hours there:\n%s", body)
	}
	if row := advRow(body, f.ns, "bob-metered"); row == "" || strings.Contains(row, "Grant hours") {
		t.Errorf("bob-metered's row (RBAC names only alice-metered) offers Grant hours or is missing:\n%s", row)
	}
	if row := advRow(body, f.ns, aliceCourse); row == "" || strings.Contains(row, "Grant hours") {
		t.Errorf("alice's course environment's row offers Grant hours on the admin page or is missing:\n%s", row)
	}
	rootToken := formToken.FindStringSubmatch(body)[1]

	// resourceNames: not bob's.
	if _, loc := advPost(t, f, root, advGrantForm(rootToken, f.ns, "bob-metered", "5")); !strings.Contains(loc, "error=") {
		t.Errorf("root's grant on bob-metered (not in his resourceNames) went to %q, want an error", loc)
	}
	// A course environment through the admin action: RBAC grant on the
	// Userland, none on the course.
	if _, loc := advPost(t, f, root, advGrantForm(rootToken, f.ns, aliceCourse, "5")); !strings.Contains(loc, "error=") {
		t.Errorf("root's admin-page grant on a course environment went to %q, want an error", loc)
	}
	// Nor on the course page (no grant on the course).
	if resp, msg := postGrant(t, f, root, rootToken, aliceCourse, "5"); resp.StatusCode == http.StatusSeeOther {
		t.Errorf("root's course-page grant without grant on the course: %s %q", resp.Status, msg)
	}

	// CSRF: none, and alice's token in root's session.
	if code, loc := advPost(t, f, root, advGrantForm("", f.ns, "alice-metered", "5")); code != http.StatusForbidden {
		t.Errorf("a grant without a CSRF token: %d %q, want 403", code, loc)
	}
	if code, loc := advPost(t, f, root, advGrantForm(aliceToken, f.ns, "alice-metered", "5")); code != http.StatusForbidden {
		t.Errorf("a grant with another session's CSRF token: %d %q, want 403", code, loc)
	}

	// Hours out of bounds.
	for _, h := range []string{"0", "-1", "101", "1e9", "1; x", "", " 5", "5.0", "99999999999999999999", "0x10"} {
		if _, loc := advPost(t, f, root, advGrantForm(rootToken, f.ns, "alice-metered", h)); !strings.Contains(loc, "error=") {
			t.Errorf("root's grant of hours %q went to %q, want an error", h, loc)
		}
	}
	for _, name := range []string{"alice-metered", "bob-metered", aliceCourse} {
		if a := advGrantAnnotation(t, f.ns, name); a != "" {
			t.Errorf("after the refused grants %s carries grant %q", name, a)
		}
	}

	// A forged "by" (and a second hours value) in the form is ignored:
	// the grant is root's, of the first value.
	form := advGrantForm(rootToken, f.ns, "alice-metered", "3")
	form.Add("by", "carol")
	form.Add("hours", "100")
	if _, loc := advPost(t, f, root, form); !strings.Contains(loc, "flash=") {
		t.Fatalf("root's grant went to %q, want a flash", loc)
	}
	g, err := budget.ParseGrant(advGrantAnnotation(t, f.ns, "alice-metered"))
	if err != nil || g.Hours != 3 || g.By != "root" {
		t.Errorf("the grant written: %+v (%v), want 3 hours by root", g, err)
	}
	// The course environment is still ungranted.
	if a := advGrantAnnotation(t, f.ns, aliceCourse); a != "" {
		t.Errorf("alice's course environment carries grant %q", a)
	}
}

// TestAdversaryPoolFiguresOnPages: a student's two environments of a
// course share one budget; hours granted on one show on both of hers and
// nowhere on another student's; the admin page, filtered to one
// template, still shows her pooled figure; bob's page never moves with
// alice's use. Figures are checked on the home page, the admin page and
// the course page's CSV.
func TestAdversaryPoolFiguresOnPages(t *testing.T) {
	t.Parallel()
	f := setup(t, func(s *gateway.Server) {
		s.Dashboard.RBACNames = gateway.Options{RBACUserPrefix: "idp:", RBACGroupPrefix: "idp:"}.RBACNames()
	})
	ctx := context.Background()
	lab := testobj.MakeTemplate(f.ns, "lab").Container("web").Idle(5 * time.Minute).Obj()
	lab2 := testobj.MakeTemplate(f.ns, "lab2").Container("web").Idle(5 * time.Minute).Obj()
	crs := testobj.MakeCourse(f.ns, "pool").Students("alice", "bob").Staff("carol").
		Template("lab", v1alpha1.ProvisionUpFront).Template("lab2", v1alpha1.ProvisionUpFront).Obj()
	crs.Spec.Limits.Budget = &v1alpha1.BudgetSpec{Hours: 10, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	for _, o := range []client.Object{lab, lab2, crs} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	names := map[string]map[string]string{}
	env.Eventually(t, 90*time.Second, "four course environments with usage", func(ctx context.Context) (bool, error) {
		var list v1alpha1.UserlandList
		if err := f.server.Reader.List(ctx, &list, client.InNamespace(f.ns), client.MatchingLabels{v1alpha1.LabelCourse: "pool"}); err != nil {
			return false, err
		}
		names = map[string]map[string]string{}
		n := 0
		for _, ul := range list.Items {
			if ul.Status.Usage == nil {
				continue
			}
			if names[ul.Spec.User] == nil {
				names[ul.Spec.User] = map[string]string{}
			}
			names[ul.Spec.User][ul.Spec.TemplateRef.Name] = ul.Name
			n++
		}
		return n == 4, nil
	})
	var c v1alpha1.Course
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "pool"}, &c); err != nil {
		t.Fatal(err)
	}
	target, err := getUserland(ctx, f.ns, names["alice"]["lab"])
	if err != nil {
		t.Fatal(err)
	}
	if err := actions.Grant(ctx, env.Client, env.Client, target, &c, nil, 2, "carol", time.Now()); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, 30*time.Second, "the grant in the gateway's cache", func(ctx context.Context) (bool, error) {
		var ul v1alpha1.Userland
		err := f.server.Reader.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: names["alice"]["lab"]}, &ul)
		return err == nil && ul.Status.Usage != nil && ul.Status.Usage.GrantedSeconds == 7200, nil
	})

	alice := browser(t)
	signIn(t, alice, f.gateway.URL, "alice", "alice-pw")
	_, home := get(t, alice, f.gateway.URL+"/", nil)
	// alice's environments of other tests' namespaces are listed too: read
	// this namespace's two.
	for _, tmpl := range []string{"lab", "lab2"} {
		if got := homeUsage(home, f.ns, names["alice"][tmpl]); !strings.Contains(got, "used of 12h") {
			t.Errorf("alice's %s shows %q on her home page, want the pooled 12h", tmpl, got)
		}
	}
	bob := browser(t)
	signIn(t, bob, f.gateway.URL, "bob", "bob-pw")
	_, bobHome := get(t, bob, f.gateway.URL+"/", nil)
	// (bob's environments of other tests' namespaces are listed too.)
	if strings.Contains(bobHome, "12h") || strings.Count(bobHome, "used of 10h") < 2 {
		t.Errorf("bob's home page moved with alice's grant, or lacks his own figures:\n%s", bobHome)
	}

	root := browser(t)
	signIn(t, root, f.gateway.URL, "root", "root-pw")
	_, admin := get(t, root, f.gateway.URL+"/dashboard/admin?namespace="+f.ns+"&template=lab2", nil)
	if row := advRow(admin, f.ns, names["alice"]["lab2"]); !strings.Contains(row, "used of 12h") {
		t.Errorf("the admin page filtered to lab2 shows alice's lab2 without her pooled grant:\n%s", row)
	}
	if row := advRow(admin, f.ns, names["bob"]["lab2"]); !strings.Contains(row, "used of 10h") {
		t.Errorf("the admin page shows bob's lab2 with the wrong figure:\n%s", row)
	}
	if row := advRow(admin, f.ns, names["alice"]["lab"]); row != "" {
		t.Errorf("the filter to lab2 lists alice's lab:\n%s", row)
	}

	carol := browser(t)
	signIn(t, carol, f.gateway.URL, "carol", "carol-pw")
	_, csv := get(t, carol, fmt.Sprintf("%s/dashboard/course?namespace=%s&name=pool&format=csv", f.gateway.URL, f.ns), nil)
	for _, line := range strings.Split(strings.TrimSpace(csv), "\n")[1:] {
		switch {
		case strings.HasPrefix(line, "alice,") && !strings.HasSuffix(line, ",12.00"):
			t.Errorf("CSV row of alice without her pooled 12h: %q\n%s", line, csv)
		case strings.HasPrefix(line, "bob,") && !strings.HasSuffix(line, ",10.00"):
			t.Errorf("CSV row of bob without his own 10h: %q\n%s", line, csv)
		}
	}
}

// TestAdversaryPoolFiguresMatchWhatGoverns: two of alice's environments
// carry a course's label and one provenance (a course since deleted, or
// a label from an earlier version), and no course governs them: each has
// its own template's budget, which the controller enforces per
// environment (budgetSharers pools only for a governing course's
// student). The pages must show each one's own budget, not a pool the
// controller does not apply: hours granted on one must not show as
// hours on the other.
func TestAdversaryPoolFiguresMatchWhatGoverns(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	metered := testobj.MakeTemplate(f.ns, "metered").Container("web").Idle(5 * time.Minute).Obj()
	metered.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 1, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	if err := env.Client.Create(ctx, metered); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alice-ghost-a", "alice-ghost-b"} {
		ul := testobj.MakeUserland(f.ns, name, "alice", "metered").Obj()
		ul.Labels = map[string]string{v1alpha1.LabelCourse: "ghost"}
		ul.Annotations = map[string]string{v1alpha1.AnnotationProvisionedByCourse: "11111111-2222-3333-4444-555555555555"}
		if err := env.Client.Create(ctx, ul); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"alice-ghost-a", "alice-ghost-b"} {
		env.Eventually(t, 60*time.Second, name+" with its usage", func(ctx context.Context) (bool, error) {
			ul, err := getUserland(ctx, f.ns, name)
			return err == nil && ul.Status.Usage != nil, nil
		})
	}
	a, err := getUserland(ctx, f.ns, "alice-ghost-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := actions.Grant(ctx, env.Client, env.Client, a, nil, &metered.Spec, 5, "root", time.Now()); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, 30*time.Second, "the grant in a's usage, in the gateway's cache", func(ctx context.Context) (bool, error) {
		var ul v1alpha1.Userland
		err := f.server.Reader.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "alice-ghost-a"}, &ul)
		return err == nil && ul.Status.Usage != nil && ul.Status.Usage.GrantedSeconds == 5*3600, nil
	})
	b, _ := getUserland(ctx, f.ns, "alice-ghost-b")
	if b.Status.Usage == nil || b.Status.Usage.GrantedSeconds != 0 || b.Status.Usage.LimitSeconds != 3600 {
		t.Fatalf("b's own usage: %+v, want 1h and no grant", b.Status.Usage)
	}
	// What the controller enforces for b: its own budget, 1h.
	root := browser(t)
	signIn(t, root, f.gateway.URL, "root", "root-pw")
	_, admin := get(t, root, f.gateway.URL+"/dashboard/admin?namespace="+f.ns+"&template=metered", nil)
	rowA, rowB := advRow(admin, f.ns, "alice-ghost-a"), advRow(admin, f.ns, "alice-ghost-b")
	if !strings.Contains(rowA, "used of 6h") {
		t.Errorf("a's row does not show its own 1h+5h:\n%s", rowA)
	}
	if !strings.Contains(rowB, "used of 1h") {
		t.Errorf("b's row shows a budget the controller does not apply to b (its own is 1h, no grant; the page pooled a's grant):\n%s", rowB)
	}

	// Related: no course governs b (course "ghost" does not exist), its
	// template's budget does; a granter (grant on userlands and courses in
	// the namespace) is still sent to a course page that does not exist.
	granter := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "granter-root"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-budget-granter"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "root"}},
	}
	if err := env.Client.Create(ctx, granter); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	_, admin = get(t, root, f.gateway.URL+"/dashboard/admin?namespace="+f.ns+"&template=metered", nil)
	token := formToken.FindStringSubmatch(admin)[1]
	_, loc := advPost(t, f, root, advGrantForm(token, f.ns, "alice-ghost-b", "1"))
	if !strings.Contains(loc, "flash=") {
		t.Errorf("a granter's grant on b, governed by its template's budget with no course, went to %q", loc)
	}
}

// homeUsage is the compute hours a home page shows for one environment.
func homeUsage(page, ns, name string) string {
	re := regexp.MustCompile(`(?s)data-namespace="` + regexp.QuoteMeta(ns) + `" data-name="` + regexp.QuoteMeta(name) + `".*?data-field="usage">([^<]*)<`)
	if m := re.FindStringSubmatch(page); m != nil {
		return m[1]
	}
	return ""
}
