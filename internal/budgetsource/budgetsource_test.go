package budgetsource_test

import (
	"context"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
	"github.com/userland-dev/userland/internal/budgetsource"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

var env *testenv.Environment

// TestMain runs a real API server: the objects are read as the webhook
// and the gateway read them.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Mode: testenv.APIOnly}, &env))
}

// TestOfReadsTheCourseThatMadeIt: whose budget an environment is under,
// and what a grant on it takes, from the stored objects: the course that
// made it (its UID in the provenance), not a label; a deleted course's
// or a namesake's environment goes back to its template, as the
// controller holds it.
func TestOfReadsTheCourseThatMadeIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	week := &v1alpha1.BudgetSpec{Hours: 10, Period: v1alpha1.BudgetWeek}
	lab := testobj.MakeTemplate(ns, "lab").Obj()
	lab.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 2, Period: v1alpha1.BudgetWeek}
	db := testobj.MakeCourse(ns, "db").Students("s@uni.example").Staff("ta@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	db.Spec.Limits.Budget = week
	gone := testobj.MakeCourse(ns, "gone").Students("s@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	for _, o := range []client.Object{lab, db, gone} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	made := func(c *v1alpha1.Course, user, basis, name string) *v1alpha1.Userland {
		ul := course.NewUserland(c, user, basis, v1alpha1.TemplateReference{Name: "lab"})
		ul.Name = name
		return ul
	}
	student := made(db, "s@uni.example", course.BasisStudentUser, "s-db")
	staff := made(db, "ta@uni.example", course.BasisStaffUser, "ta-db")
	orphan := made(gone, "s@uni.example", course.BasisStudentUser, "s-gone")
	namesake := made(db, "s@uni.example", course.BasisStudentUser, "s-namesake")
	namesake.Annotations[v1alpha1.AnnotationProvisionedByCourse] = "uid-of-an-earlier-db"
	plain := testobj.MakeUserland(ns, "plain", "p@uni.example", "lab").Obj()
	noTemplate := testobj.MakeUserland(ns, "none", "n@uni.example", "missing").Obj()
	for _, o := range []client.Object{student, staff, orphan, namesake, plain, noTemplate} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	type got struct {
		Hours  int32
		Course string
		Grant  string
	}
	grantOn := func(resource, name string) string {
		return access.Action{Verb: v1alpha1.VerbGrant, Group: v1alpha1.GroupVersion.Group, Resource: resource, Namespace: ns, Name: name}.String()
	}
	cases := map[string]struct {
		ul   *v1alpha1.Userland
		want got
	}{
		"the course's student":                  {student, got{10, "db", grantOn("courses", "db")}},
		"the course's staff: exempt, its grant": {staff, got{0, "db", grantOn("courses", "db")}},
		"a deleted course's: the template's":    {orphan, got{2, "", grantOn("userlands", "s-gone")}},
		"a namesake's label: the template's":    {namesake, got{2, "", grantOn("userlands", "s-namesake")}},
		"outside a course":                      {plain, got{2, "", grantOn("userlands", "plain")}},
		"a template that does not exist":        {noTemplate, got{0, "", grantOn("userlands", "none")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src, err := budgetsource.Of(ctx, env.Client, tc.ul)
			if err != nil {
				t.Fatal(err)
			}
			var g got
			if src.Spec != nil {
				g.Hours = src.Spec.Hours
			}
			if src.Course != nil {
				g.Course = src.Course.Name
			}
			g.Grant = src.GrantAction(tc.ul).String()
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("budgetsource.Of (-want +got):\n%s", diff)
			}
		})
	}
}
