package webhook_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestCourseValidation: every invalid course is refused by the schema or
// the webhook, with the field path and the reason.
func TestCourseValidation(t *testing.T) {
	startWebhooks(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	if err := env.Client.Create(ctx, compliant(ns, "lab")); err != nil {
		t.Fatal(err)
	}
	valid := func() *testobj.CourseWrapper {
		return testobj.MakeCourse(ns, "c").Students("a@uni.example").Template("lab", v1alpha1.ProvisionUpFront)
	}
	now := time.Now().Truncate(time.Second)
	cases := []struct {
		name   string
		course *v1alpha1.Course
		want   map[string]string
	}{
		{"term end before start", valid().Term(now, now.Add(-time.Hour)).Obj(),
			map[string]string{"spec.term.end": "must be after term.start"}},
		{"student listed twice", valid().Students("a@uni.example").Obj(),
			map[string]string{"spec.students.users[1]": "Duplicate value"}},
		{"student also staff", valid().Staff("a@uni.example").Obj(),
			map[string]string{"spec.staff.users[0]": "Duplicate value"}},
		{"template that does not exist", valid().Template("nope", v1alpha1.ProvisionOnSignIn).Obj(),
			map[string]string{"spec.templates[1].name": `no Template "nope" exists in namespace ` + ns}},
		{"running limit zero", valid().MaxRunning(0).Obj(),
			map[string]string{"spec.limits.maxRunning": "should be greater than or equal to 1"}},
		{"cap of an unknown resource", func() *v1alpha1.Course {
			c := valid().PerStudent("1", "1Gi").Obj()
			c.Spec.Limits.PerStudent["nvidia.com/gpu"] = c.Spec.Limits.PerStudent["cpu"]
			delete(c.Spec.Limits.PerStudent, "memory")
			return c
		}(), map[string]string{"spec.limits.perStudent": "only cpu and memory"}},
		{"negative cap", valid().PerStudent("-1", "1Gi").Obj(),
			map[string]string{"spec.limits.perStudent": "caps must be positive"}},
		{"no templates", func() *v1alpha1.Course {
			c := valid().Obj()
			c.Spec.Templates = nil
			return c
		}(), map[string]string{"spec.templates": "Required value"}},
		{"shared volumes on one path", valid().SharedVolume("a", "x", "/course").SharedVolume("b", "y", "/course").Obj(),
			map[string]string{"spec.sharedVolumes": "mountPath must be unique"}},
		{"name too long for a label", func() *v1alpha1.Course {
			c := valid().Obj()
			c.Name = strings.Repeat("a", 64)
			return c
		}(), map[string]string{"metadata.name": "may not be more than 63"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertCauses(t, env.Client.Create(ctx, tc.course), tc.want)
		})
	}
	if err := env.Client.Create(ctx, valid().Obj()); err != nil {
		t.Fatalf("a valid course was refused: %v", err)
	}
}

// TestCourseManagersRunCoursesNotTemplates: the course manager role
// edits courses and rosters, and cannot change what runs.
func TestCourseManagersRunCoursesNotTemplates(t *testing.T) {
	startWebhooks(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	if err := env.CreateFromFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", "roles.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, compliant(ns, "lab")); err != nil {
		t.Fatal(err)
	}
	const instructor = "prof@uni.example"
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prof"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-course-manager"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: instructor}},
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.ConfigFor(instructor), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	course := testobj.MakeCourse(ns, "db").Students("a@uni.example").Template("lab", v1alpha1.ProvisionUpFront).Obj()
	if err := c.Create(ctx, course); err != nil {
		t.Fatalf("a course manager cannot create a course: %v", err)
	}
	patch := client.MergeFrom(course.DeepCopy())
	course.Spec.Students.Users = append(course.Spec.Students.Users, "b@uni.example")
	if err := c.Patch(ctx, course, patch); err != nil {
		t.Fatalf("a course manager cannot change the roster: %v", err)
	}
	var tmpl v1alpha1.Template
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "lab"}, &tmpl); err != nil {
		t.Fatalf("a course manager cannot read templates: %v", err)
	}
	tmpl.Spec.PodTemplate.Spec.Containers[0].Image = "evil.example/miner:1"
	if err := c.Update(ctx, &tmpl); !apierrors.IsForbidden(err) {
		t.Errorf("updating a Template: %v, want Forbidden", err)
	}
	if err := c.Create(ctx, compliant(ns, "mine")); !apierrors.IsForbidden(err) {
		t.Errorf("creating a Template: %v, want Forbidden", err)
	}
	ul := testobj.MakeUserland(ns, "u", "x@uni.example", "lab").Obj()
	if err := c.Create(ctx, ul); !apierrors.IsForbidden(err) {
		t.Errorf("creating a Userland by hand: %v, want Forbidden", err)
	}
	other := env.Namespace(t)
	if err := c.Create(ctx, testobj.MakeCourse(other, "x").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()); !apierrors.IsForbidden(err) {
		t.Errorf("creating a course in a namespace not granted: %v, want Forbidden", err)
	}
}
