package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestAdversaryToday2CourseGrantOnlyWhatTheBudgetGoverns: carol, a granter
// on db, names on db's grant form every environment db's budget does not
// govern: a staff member's of db, one outside any course, one labelled db
// by hand (no provenance), a namesake's (another UID), a non-roster user's,
// and a missing name. Each is refused with the same status and body as
// the missing name, and none carries a grant. The control is granted.
func TestAdversaryToday2CourseGrantOnlyWhatTheBudgetGoverns(t *testing.T) {
	t.Parallel()
	f := setup(t, func(s *gateway.Server) {
		s.Dashboard.RBACNames = gateway.Options{RBACUserPrefix: "idp:", RBACGroupPrefix: "idp:"}.RBACNames()
	})
	ctx := context.Background()
	lab := testobj.MakeTemplate(f.ns, "lab").Container("web").Idle(5 * time.Minute).Obj()
	db := testobj.MakeCourse(f.ns, "db").Students("alice").Staff("carol", "erin").Template("lab", v1alpha1.ProvisionUpFront).Obj()
	db.Spec.Limits.Budget = &v1alpha1.BudgetSpec{Hours: 10, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "granter-carol"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-budget-granter"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "idp:carol"}},
	}
	for _, o := range []client.Object{lab, db, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var live v1alpha1.Course
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(db), &live); err != nil {
		t.Fatal(err)
	}
	mk := func(name, user string, labels, annotations map[string]string) string {
		ul := testobj.MakeUserland(f.ns, name, user, "lab").Obj()
		ul.Labels, ul.Annotations = labels, annotations
		if err := env.Client.Create(ctx, ul); err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
		return name
	}
	uid := string(live.UID)
	targets := map[string]string{
		"staff erin's, made by db": mk("erin-db", "erin", map[string]string{v1alpha1.LabelCourse: "db"},
			map[string]string{v1alpha1.AnnotationProvisionedByCourse: uid, v1alpha1.AnnotationEnrolledBy: course.BasisStaffUser}),
		"alice's outside any course": mk("alice-own", "alice", nil, nil),
		"labelled db by hand":        mk("alice-label", "alice", map[string]string{v1alpha1.LabelCourse: "db"}, nil),
		"a namesake db's (other UID)": mk("alice-old", "alice", map[string]string{v1alpha1.LabelCourse: "db"},
			map[string]string{v1alpha1.AnnotationProvisionedByCourse: "0f0f0f0f-0000-0000-0000-000000000000", v1alpha1.AnnotationEnrolledBy: course.BasisStudentUser}),
		"mallory's, not on the roster": mk("mallory-db", "mallory", map[string]string{v1alpha1.LabelCourse: "db"},
			map[string]string{v1alpha1.AnnotationProvisionedByCourse: uid, v1alpha1.AnnotationEnrolledBy: course.BasisStudentUser}),
	}
	alicesEnv := courseEnv("db", "alice")
	for _, name := range append([]string{alicesEnv}, "erin-db", "alice-own", "alice-label", "alice-old", "mallory-db") {
		env.Eventually(t, 60*time.Second, name+" in the gateway's cache", func(ctx context.Context) (bool, error) {
			var ul v1alpha1.Userland
			return f.server.Reader.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &ul) == nil, nil
		})
	}
	carol := browser(t)
	signIn(t, carol, f.gateway.URL, "carol", "carol-pw")
	page := fmt.Sprintf("%s/dashboard/course?namespace=%s&name=db", f.gateway.URL, f.ns)
	var body string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, body = get(t, carol, page, nil)
		return strings.Contains(body, "Grant hours"), nil
	}); err != nil {
		t.Fatalf("carol is never offered Grant hours:\n%s", body)
	}
	token := formToken.FindStringSubmatch(body)[1]
	missResp, missBody := postGrant(t, f, carol, token, "no-such-env", "5")
	t.Logf("missing name: %d %q", missResp.StatusCode, missBody)
	for what, name := range targets {
		resp, msg := postGrant(t, f, carol, token, name, "5")
		if resp.StatusCode != missResp.StatusCode || msg != missBody {
			t.Errorf("HOLE? %s (%s): %d %q, unlike a missing name's %d %q", what, name, resp.StatusCode, msg, missResp.StatusCode, missBody)
		}
		ul, err := getUserland(ctx, f.ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if g := ul.Annotations[v1alpha1.AnnotationBudgetGrant]; g != "" {
			t.Errorf("HOLE: %s (%s) carries grant %q", what, name, g)
		}
	}
	if resp, msg := postGrant(t, f, carol, token, alicesEnv, "2"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("control: carol's grant to alice's db environment: %s %q", resp.Status, msg)
	}
}
