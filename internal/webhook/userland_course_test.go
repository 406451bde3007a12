package webhook_test

import (
	"context"
	"path/filepath"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

// clientAs is a client acting as user, bound in ns to the ClusterRole or
// Role named by ref.
func clientAs(t *testing.T, ns, user string, ref rbacv1.RoleRef) client.Client {
	t.Helper()
	ctx := context.Background()
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "as-"},
		RoleRef:    ref,
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.ConfigFor(user), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func clusterRole(name string) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
}

func loadRoles(t *testing.T) {
	t.Helper()
	if err := env.CreateFromFile(context.Background(), filepath.Join(testenv.RepoRoot(), "config", "rbac", "roles.yaml")); err != nil {
		t.Fatal(err)
	}
}

// patchUserland applies edit to the stored Userland name as c.
func patchUserland(ctx context.Context, c client.Client, ns, name string, edit func(*v1alpha1.Userland)) error {
	var ul v1alpha1.Userland
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &ul); err != nil {
		return err
	}
	patch := client.MergeFrom(ul.DeepCopy())
	if ul.Labels == nil {
		ul.Labels = map[string]string{}
	}
	if ul.Annotations == nil {
		ul.Annotations = map[string]string{}
	}
	edit(&ul)
	return c.Patch(ctx, &ul, patch)
}

// TestOnlyTheControllerAndGatewayLinkEnvironmentsToCourses: whoever may
// edit Userlands (a user manager, a course manager) cannot move somebody's
// environment into a course, out of it, or make it look like one the
// course made; the course would retire it and its staff reach it. The
// controller's and the gateway's roles can, and so can a role granted
// enroll on exactly one course, for that course only.
func TestOnlyTheControllerAndGatewayLinkEnvironmentsToCourses(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	if err := env.Client.Create(ctx, compliant(ns, "lab")); err != nil {
		t.Fatal(err)
	}
	db := testobj.MakeCourse(ns, "db").Students("s@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	evil := testobj.MakeCourse(ns, "evil").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	for _, o := range []client.Object{db, evil, testobj.MakeUserland(ns, "victim-lab", "victim@uni.example", "lab").Obj()} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	controller, err := client.New(env.ConfigFor("userland-controller-under-test"), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	gwConfig, err := env.ConfigBoundTo(ctx, "userland-gateway-under-test", "userland-gateway")
	if err != nil {
		t.Fatal(err)
	}
	gateway, err := client.New(gwConfig, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	made := func(name, user string) *v1alpha1.Userland {
		ul := course.NewUserland(db, user, course.BasisStudentUser, v1alpha1.TemplateReference{Name: "lab"})
		ul.Name = name
		return ul
	}
	// The controller (listed students) and the gateway (sign-in) link.
	if err := controller.Create(ctx, made("s-lab-db", "s@uni.example")); err != nil {
		t.Fatalf("the controller cannot create a course's environment: %v", err)
	}
	if err := gateway.Create(ctx, made("g-lab-db", "g@uni.example")); err != nil {
		t.Fatalf("the gateway cannot create a course's environment: %v", err)
	}

	userManager := clientAs(t, ns, "tamgr@uni.example", clusterRole("userland-user-manager"))
	const refusal = "tamgr@uni.example may not enroll courses.userland.dev "
	label := "metadata.labels[" + v1alpha1.LabelCourse + "]"
	enrolled := "metadata.annotations[" + v1alpha1.AnnotationEnrolledBy + "]"
	provenance := "metadata.annotations[" + v1alpha1.AnnotationProvisionedByCourse + "]"
	cases := []struct {
		name    string
		attempt func() error
		want    map[string]string
	}{
		{"create an environment in a course", func() error {
			ul := testobj.MakeUserland(ns, "x-lab", "x@uni.example", "lab").Obj()
			ul.Labels = map[string]string{v1alpha1.LabelCourse: "evil"}
			return userManager.Create(ctx, ul)
		}, map[string]string{label: refusal + "evil in namespace " + ns}},
		{"create one that looks made by the course", func() error {
			return userManager.Create(ctx, made("y-lab-db", "y@uni.example"))
		}, map[string]string{label: refusal + "db", enrolled: refusal + "db", provenance: refusal + "db"}},
		{"move someone's environment into a course", func() error {
			return patchUserland(ctx, userManager, ns, "victim-lab", func(ul *v1alpha1.Userland) {
				ul.Labels[v1alpha1.LabelCourse] = "evil"
				ul.Annotations[v1alpha1.AnnotationEnrolledBy] = course.BasisStudentUser
			})
		}, map[string]string{label: refusal + "evil", enrolled: refusal + "evil"}},
		{"mark an environment as the course's", func() error {
			return patchUserland(ctx, userManager, ns, "s-lab-db", func(ul *v1alpha1.Userland) {
				ul.Annotations[v1alpha1.AnnotationProvisionedByCourse] = "forged"
			})
		}, map[string]string{provenance: refusal + "db"}},
		{"take an environment out of its course", func() error {
			return patchUserland(ctx, userManager, ns, "s-lab-db", func(ul *v1alpha1.Userland) { delete(ul.Labels, v1alpha1.LabelCourse) })
		}, map[string]string{label: refusal + "db"}},
		{"move a course's environment to another course", func() error {
			return patchUserland(ctx, userManager, ns, "s-lab-db", func(ul *v1alpha1.Userland) { ul.Labels[v1alpha1.LabelCourse] = "evil" })
		}, map[string]string{label: refusal + "db"}},
		{"change how someone was enrolled", func() error {
			return patchUserland(ctx, userManager, ns, "s-lab-db", func(ul *v1alpha1.Userland) {
				ul.Annotations[v1alpha1.AnnotationEnrolledBy] = course.BasisStaffUser
			})
		}, map[string]string{enrolled: refusal + "db"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertCauses(t, tc.attempt(), tc.want)
		})
	}
	t.Run("other edits of a course's environment pass", func(t *testing.T) {
		err := patchUserland(ctx, userManager, ns, "s-lab-db", func(ul *v1alpha1.Userland) {
			ul.Spec.Suspend = true
			ul.Annotations["example.edu/note"] = "paused for maintenance"
		})
		if err != nil {
			t.Errorf("a user manager's ordinary edit was refused: %v", err)
		}
	})
	t.Run("a course manager cannot move an environment into a course", func(t *testing.T) {
		manager := clientAs(t, ns, "prof@uni.example", clusterRole("userland-course-manager"))
		err := patchUserland(ctx, manager, ns, "victim-lab", func(ul *v1alpha1.Userland) { ul.Labels[v1alpha1.LabelCourse] = "evil" })
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("a course manager labelled another user's environment: %v, want it refused", err)
		}
	})
	t.Run("enroll on one course links to that course only", func(t *testing.T) {
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "enroll-db"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"userland.dev"}, Resources: []string{"courses"}, Verbs: []string{v1alpha1.VerbEnroll}, ResourceNames: []string{"db"}},
				{APIGroups: []string{"userland.dev"}, Resources: []string{"userlands"}, Verbs: []string{"get", "create", "patch"}},
			},
		}
		if err := env.Client.Create(ctx, role); err != nil {
			t.Fatal(err)
		}
		scoped := clientAs(t, ns, "importer@uni.example", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "enroll-db"})
		if err := scoped.Create(ctx, made("z-lab-db", "z@uni.example")); err != nil {
			t.Errorf("linking to the course granted: %v", err)
		}
		err := patchUserland(ctx, scoped, ns, "z-lab-db", func(ul *v1alpha1.Userland) { ul.Labels[v1alpha1.LabelCourse] = "evil" })
		assertCauses(t, err, map[string]string{label: "importer@uni.example may not enroll courses.userland.dev evil"})
	})
}
