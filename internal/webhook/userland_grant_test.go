package webhook_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestOnlyGrantersGrantBudget: no confused deputy. Whoever may edit
// Userlands, a course's listed staff among them, cannot give anyone extra
// budget; RBAC's grant verb on the course (or, outside a course, on the
// Userland) decides, and the gateway, which asks RBAC for the person
// first, holds it.
func TestOnlyGrantersGrantBudget(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	db := testobj.MakeCourse(ns, "db").Students("s@uni.example").Staff("ta@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	for _, o := range []client.Object{compliant(ns, "lab"), db} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// Made by the course (its UID in the provenance, as the controller
	// makes them): a label alone would not make it the course's.
	student := course.NewUserland(db, "s@uni.example", course.BasisStudentUser, v1alpha1.TemplateReference{Name: "lab"})
	student.Name = "s-lab-db"
	for _, o := range []client.Object{student, testobj.MakeUserland(ns, "free", "f@uni.example", "lab").Obj()} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The listed staff member edits Userlands, as a user manager.
	staff := clientAs(t, ns, "ta@uni.example", clusterRole("userland-user-manager"))
	granter := clientAs(t, ns, "prof@uni.example", clusterRole("userland-user-manager"))
	clientAs(t, ns, "prof@uni.example", clusterRole("userland-budget-granter"))
	// As the chart runs it: a ServiceAccount.
	gwConfig, err := env.ConfigBoundTo(ctx, "system:serviceaccount:userland-system:gateway-grant-under-test", "userland-gateway")
	if err != nil {
		t.Fatal(err)
	}
	gateway, err := client.New(gwConfig, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// A person holding the gateway's role is still a person: they record
	// only themself.
	personConfig, err := env.ConfigBoundTo(ctx, "gw-admin@uni.example", "userland-gateway")
	if err != nil {
		t.Fatal(err)
	}
	gatewayRolePerson, err := client.New(personConfig, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	path := "metadata.annotations[" + v1alpha1.AnnotationBudgetGrant + "]"
	grant := func(c client.Client, name, value string) error {
		return patchUserland(ctx, c, ns, name, func(ul *v1alpha1.Userland) { ul.Annotations[v1alpha1.AnnotationBudgetGrant] = value })
	}
	const week = "2026-11-23T00:00:00Z="
	cases := []struct {
		name    string
		attempt func() error
		// want is "" for allowed, else a fragment of the error at path.
		want string
	}{
		{"listed staff without the grant verb", func() error { return grant(staff, "s-lab-db", week+"5;ta") },
			"ta@uni.example may not grant courses.userland.dev db"},
		{"a granter grants on the course", func() error { return grant(granter, "s-lab-db", week+"3;prof@uni.example") }, ""},
		{"nor can the gateway's role held by a person", func() error { return grant(gatewayRolePerson, "s-lab-db", week+"7;prof") },
			`it must say "gw-admin@uni.example" after the ';'`},
		{"a granter cannot record the grant as someone else's", func() error { return grant(granter, "s-lab-db", week+"6;dean@uni.example") },
			`it must say "prof@uni.example" after the ';'`},
		{"listed staff cannot raise it either", func() error { return grant(staff, "s-lab-db", week+"30;ta") },
			"may not grant"},
		{"nor remove it", func() error {
			return patchUserland(ctx, staff, ns, "s-lab-db", func(ul *v1alpha1.Userland) { delete(ul.Annotations, v1alpha1.AnnotationBudgetGrant) })
		}, "may not grant"},
		{"a value that is not a grant", func() error { return grant(granter, "s-lab-db", "lots") }, "want <period start>=<hours>"},
		{"too many hours", func() error { return grant(granter, "s-lab-db", week+"5000") }, "from 0 to 1000"},
		{"outside a course, grant on the Userland decides", func() error { return grant(granter, "free", week+"2") }, ""},
		{"outside a course, a user manager cannot", func() error { return grant(staff, "free", week+"4") }, "may not grant userlands.userland.dev free"},
		// A ServiceAccount acts for people: it names the one it asked about.
		{"the gateway, which asks RBAC for the person first, can", func() error { return grant(gateway, "s-lab-db", week+"4;prof") }, ""},
	}
	for _, tc := range cases {
		err := tc.attempt()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s: admitted, want refused at %s", tc.name, path)
		case tc.want != "":
			var status apierrors.APIStatus
			ok := false
			if apierrors.IsInvalid(err) && errors.As(err, &status) {
				for _, c := range status.Status().Details.Causes {
					ok = ok || (c.Field == path && strings.Contains(c.Message, tc.want))
				}
			}
			if !ok {
				t.Errorf("%s: %v; want Invalid at %s saying %q", tc.name, err, path, tc.want)
			}
		}
	}
}

// TestAGrantUnderADeletedCoursesLabelTakesTheUserlands: an environment a
// course made keeps the course's label after the course is deleted, and
// the controller then holds it to its template's budget, its own. RBAC's
// grant on a Course of that name (a Role with resourceNames, left from
// the course, or made for a new course of the name) does not reach it;
// grant on the Userland does, as outside any course.
func TestAGrantUnderADeletedCoursesLabelTakesTheUserlands(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	lab := compliant(ns, "lab")
	lab.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 2, Period: v1alpha1.BudgetWeek}
	ghost := testobj.MakeCourse(ns, "ghost").Students("s@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	for _, o := range []client.Object{lab, ghost} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	left := course.NewUserland(ghost, "s@uni.example", course.BasisStudentUser, v1alpha1.TemplateReference{Name: "lab"})
	left.Name = "s-lab-ghost"
	if err := env.Client.Create(ctx, left); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	courseGranter := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grant-ghost"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"courses"},
			ResourceNames: []string{"ghost"}, Verbs: []string{v1alpha1.VerbGrant}}},
	}
	if err := env.Client.Create(ctx, courseGranter); err != nil {
		t.Fatal(err)
	}
	ta := clientAs(t, ns, "ta@uni.example", clusterRole("userland-user-manager"))
	clientAs(t, ns, "ta@uni.example", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "grant-ghost"})
	prof := clientAs(t, ns, "prof@uni.example", clusterRole("userland-user-manager"))
	clientAs(t, ns, "prof@uni.example", clusterRole("userland-budget-granter"))

	const week = "2026-11-23T00:00:00Z="
	path := "metadata.annotations[" + v1alpha1.AnnotationBudgetGrant + "]"
	err := patchUserland(ctx, ta, ns, left.Name, func(ul *v1alpha1.Userland) {
		ul.Annotations[v1alpha1.AnnotationBudgetGrant] = week + "5;ta@uni.example"
	})
	var status apierrors.APIStatus
	refused := false
	if apierrors.IsInvalid(err) && errors.As(err, &status) {
		for _, c := range status.Status().Details.Causes {
			refused = refused || (c.Field == path && strings.Contains(c.Message, "may not grant userlands.userland.dev "+left.Name))
		}
	}
	if !refused {
		t.Errorf("grant on the deleted course's name granting its former student's environment: %v; want Invalid at %s asking for grant on the Userland", err, path)
	}
	if err := patchUserland(ctx, prof, ns, left.Name, func(ul *v1alpha1.Userland) {
		ul.Annotations[v1alpha1.AnnotationBudgetGrant] = week + "1;prof@uni.example"
	}); err != nil {
		t.Errorf("grant on the Userland (its template's budget governs it): %v", err)
	}
}
