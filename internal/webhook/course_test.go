package webhook_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestCourseValidation: every invalid course is refused by the schema or
// the webhook, with the field path and the reason.
func TestCourseValidation(t *testing.T) {
	t.Parallel()
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
		{"session in an unknown time zone", valid().Weekly("Monday", "09:00", "10:00", "Europe/Berlin").Weekly("Tuesday", "09:00", "10:00", "Europe/Atlantis").Obj(),
			map[string]string{"spec.schedule.sessions[1].timeZone": `unknown IANA time zone "Europe/Atlantis"`}},
		{"session in the machine's zone", valid().Weekly("Monday", "09:00", "10:00", "Local").Obj(),
			map[string]string{"spec.schedule.sessions[0].timeZone": "is not an IANA time zone name"}},
		{"session ending before it starts", valid().Weekly("Monday", "10:00", "09:00", "Asia/Tokyo").Obj(),
			map[string]string{"spec.schedule.sessions[0].end": "must be after start"}},
		{"session start not HH:MM", valid().Weekly("Monday", "9:00", "10:00", "Asia/Tokyo").Obj(),
			map[string]string{"spec.schedule.sessions[0].start": "should match"}},
		{"session end not a time of day", valid().Weekly("Monday", "09:00", "25:00", "Asia/Tokyo").Obj(),
			map[string]string{"spec.schedule.sessions[0].end": "should match"}},
		{"session both weekly and dated", func() *v1alpha1.Course {
			c := valid().Dated("2026-12-10", "09:00", "10:00", "UTC").Obj()
			c.Spec.Schedule.Sessions[0].Day = ptr.To(v1alpha1.Weekday("Monday"))
			return c
		}(), map[string]string{"spec.schedule.sessions[0]": "exactly one of day (weekly) or date (once)"}},
		{"session on no day of the week", valid().Weekly("Mondai", "09:00", "10:00", "UTC").Obj(),
			map[string]string{"spec.schedule.sessions[0].day": "Unsupported value"}},
		{"exception that is not a date", valid().Weekly("Monday", "09:00", "10:00", "UTC").Exceptions("24.12.2026").Obj(),
			map[string]string{"spec.schedule.exceptions[0]": "date"}},
		{"warm-up longer than 2h", valid().Weekly("Monday", "09:00", "10:00", "UTC").Warmup(3 * time.Hour).Obj(),
			map[string]string{"spec.schedule.warmup": "at most 2h"}},
		{"warm share above 100", valid().Weekly("Monday", "09:00", "10:00", "UTC").WarmPercent(101).Obj(),
			map[string]string{"spec.schedule.warmPercent": "less than or equal to 100"}},
		{"more than 200 placeholders", valid().Weekly("Monday", "09:00", "10:00", "UTC").Placeholders(201).Obj(),
			map[string]string{"spec.schedule.placeholders": "less than or equal to 200"}},
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
	t.Parallel()
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

// TestSharedMaterialIsNobodysHome: a course manager cannot share a
// student's home claim with the class (read-write for staff), nor a claim
// they may not read; material they may read is shared, and a claim that
// does not exist yet may be named by who may get it.
func TestSharedMaterialIsNobodysHome(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	home := testobj.MakeUserland(ns, "alice-lab", "alice@uni.example", "lab").Obj()
	if err := env.Client.Create(ctx, compliant(ns, "lab")); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, home); err != nil {
		t.Fatal(err)
	}
	claim := func(name string, labels map[string]string, owners ...metav1.OwnerReference) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, OwnerReferences: owners},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
	}
	owner := metav1.OwnerReference{APIVersion: "userland.dev/v1alpha1", Kind: "Userland", Name: home.Name, UID: home.UID}
	for _, pvc := range []*corev1.PersistentVolumeClaim{
		// As the controller labels a home claim.
		claim("alice-lab-home", map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelUserland: "alice-lab"}),
		// Owned by the Userland, its label taken off.
		claim("alice-lab-data", nil, owner),
		claim("material", nil),
		claim("grades", nil),
	} {
		if err := env.Client.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
	}
	manager := clientAs(t, ns, "prof@uni.example", clusterRole("userland-course-manager"))
	// The namespace's administrator lets the manager read and write the
	// material and the students' claims (say, to resize them), not the
	// grades.
	reader := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-claims"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "update"},
			ResourceNames: []string{"material", "alice-lab-home", "alice-lab-data", "later"}}},
	}
	if err := env.Client.Create(ctx, reader); err != nil {
		t.Fatal(err)
	}
	clientAs(t, ns, "prof@uni.example", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-claims"})
	withClaim := func(name, claimName string) *v1alpha1.Course {
		return testobj.MakeCourse(ns, name).Students("a@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).
			SharedVolume("material", claimName, "/course").Obj()
	}
	cases := []struct {
		name   string
		course *v1alpha1.Course
		want   map[string]string
	}{
		{"a student's home claim", withClaim("c1", "alice-lab-home"),
			map[string]string{"spec.sharedVolumes[0].claimName": `claim "alice-lab-home" belongs to a Userland`}},
		{"a claim a Userland owns", withClaim("c2", "alice-lab-data"),
			map[string]string{"spec.sharedVolumes[0].claimName": `claim "alice-lab-data" belongs to a Userland`}},
		{"a claim the manager may not read", withClaim("c3", "grades"),
			map[string]string{"spec.sharedVolumes[0].claimName": "prof@uni.example may not get persistentvolumeclaims grades in namespace " + ns}},
		{"a missing claim the manager may not read", withClaim("c4", "nothing-yet"),
			map[string]string{"spec.sharedVolumes[0].claimName": "may not get persistentvolumeclaims nothing-yet"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertCauses(t, manager.Create(ctx, tc.course), tc.want)
		})
	}
	ok := withClaim("ok", "material")
	if err := manager.Create(ctx, ok); err != nil {
		t.Fatalf("sharing material the manager may read was refused: %v", err)
	}
	if err := manager.Create(ctx, withClaim("later", "later")); err != nil {
		t.Errorf("naming a claim that does not exist yet, which the manager may get, was refused: %v", err)
	}
	// Adding a home claim later is refused the same way; a roster change
	// does not re-ask about the material already admitted.
	patch := client.MergeFrom(ok.DeepCopy())
	ok.Spec.SharedVolumes = append(ok.Spec.SharedVolumes, v1alpha1.SharedVolume{Name: "home", ClaimName: "alice-lab-home", MountPath: "/alice"})
	assertCauses(t, manager.Patch(ctx, ok, patch), map[string]string{
		"spec.sharedVolumes[1].claimName": `claim "alice-lab-home" belongs to a Userland`,
	})
	if err := env.Client.Delete(ctx, reader); err != nil {
		t.Fatal(err)
	}
	var live v1alpha1.Course
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ok), &live); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(live.DeepCopy())
	live.Spec.Students.Users = append(live.Spec.Students.Users, "b@uni.example")
	if err := manager.Patch(ctx, &live, patch); err != nil {
		t.Errorf("a roster change was refused for material admitted before: %v", err)
	}
}
