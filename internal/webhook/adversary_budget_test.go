package webhook_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/testobj"
)

const advWeek = "2026-11-23T00:00:00Z="

// TestAdversaryGrantsStayInTheirCourse: a teaching assistant allowed to
// grant on course a only (a Role of their own with resourceNames, as
// roles.yaml suggests) and holding edit (userland-user-manager) cannot
// reach course b's student: not directly, not by unlinking the
// environment from b in the same write (the grant would then be asked on
// the Userland), not by creating a fresh Userland outside any course that
// carries a grant from the start, and a student with no RBAC at all
// cannot write one on their own environment.
func TestAdversaryGrantsStayInTheirCourse(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	a := testobj.MakeCourse(ns, "a").Students("s@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	b := testobj.MakeCourse(ns, "b").Students("t@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	for _, o := range []client.Object{compliant(ns, "lab"), a, b} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	sa := course.NewUserland(a, "s@uni.example", course.BasisStudentUser, v1alpha1.TemplateReference{Name: "lab"})
	sa.Name = "s-lab-a"
	tb := course.NewUserland(b, "t@uni.example", course.BasisStudentUser, v1alpha1.TemplateReference{Name: "lab"})
	tb.Name = "t-lab-b"
	for _, o := range []client.Object{sa, tb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grant-a"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"courses"},
			ResourceNames: []string{"a"}, Verbs: []string{v1alpha1.VerbGrant}}},
	}); err != nil {
		t.Fatal(err)
	}
	const ta = "ta@uni.example"
	taClient := clientAs(t, ns, ta, clusterRole("userland-user-manager"))
	clientAs(t, ns, ta, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "grant-a"})
	waitAuthorized(t, taClient, &v1alpha1.UserlandList{}, client.InNamespace(ns))
	student, err := client.New(env.ConfigFor("s@uni.example"), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	set := func(c client.Client, name string, edit func(*v1alpha1.Userland)) error {
		return patchUserland(ctx, c, ns, name, edit)
	}
	grant := func(v string) func(*v1alpha1.Userland) {
		return func(ul *v1alpha1.Userland) { ul.Annotations[v1alpha1.AnnotationBudgetGrant] = v }
	}
	// Control: the assistant may grant in course a (retried while the
	// binding settles).
	env.Eventually(t, 0, "the assistant's grant in course a", func(ctx context.Context) (bool, error) {
		return set(taClient, "s-lab-a", grant(advWeek+"2;"+ta)) == nil, nil
	})

	attacks := []struct {
		name    string
		attempt func() error
	}{
		{"grant to course b's student", func() error { return set(taClient, "t-lab-b", grant(advWeek+"50;"+ta)) }},
		{"grant to course b's student while unlinking it from b", func() error {
			return set(taClient, "t-lab-b", func(ul *v1alpha1.Userland) {
				delete(ul.Labels, v1alpha1.LabelCourse)
				ul.Annotations[v1alpha1.AnnotationBudgetGrant] = advWeek + "50;" + ta
			})
		}},
		{"grant to course b's student while relabelling it into a", func() error {
			return set(taClient, "t-lab-b", func(ul *v1alpha1.Userland) {
				ul.Labels[v1alpha1.LabelCourse] = "a"
				ul.Annotations[v1alpha1.AnnotationBudgetGrant] = advWeek + "50;" + ta
			})
		}},
		{"a new Userland outside any course born with a grant", func() error {
			ul := testobj.MakeUserland(ns, "fresh", "t@uni.example", "lab").Obj()
			ul.Annotations = map[string]string{v1alpha1.AnnotationBudgetGrant: advWeek + "1000;" + ta}
			return taClient.Create(ctx, ul)
		}},
		{"a new Userland born into course a carrying a grant", func() error {
			ul := course.NewUserland(a, "t@uni.example", course.BasisStudentUser, v1alpha1.TemplateReference{Name: "lab"})
			ul.Name = "t-lab-a"
			ul.Annotations[v1alpha1.AnnotationBudgetGrant] = advWeek + "1000;" + ta
			return taClient.Create(ctx, ul)
		}},
		{"a grant in course a recorded as the professor's", func() error { return set(taClient, "s-lab-a", grant(advWeek+"3;prof@uni.example")) }},
		{"the student on their own environment", func() error { return set(student, "s-lab-a", grant(advWeek+"1000;s")) }},
		{"the student with a JSON patch", func() error {
			ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s-lab-a"}}
			return student.Patch(ctx, ul, client.RawPatch(types.JSONPatchType,
				[]byte(`[{"op":"add","path":"/metadata/annotations/userland.dev~1budget-grant","value":"`+advWeek+`1000"}]`)))
		}},
	}
	for _, at := range attacks {
		if err := at.attempt(); err == nil {
			t.Errorf("HOLE: %s was admitted", at.name)
		} else {
			t.Logf("held: %s: %v", at.name, err)
		}
	}
	var ul v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tb), &ul); err != nil {
		t.Fatal(err)
	}
	if g := ul.Annotations[v1alpha1.AnnotationBudgetGrant]; g != "" || ul.Labels[v1alpha1.LabelCourse] != "b" {
		t.Errorf("course b's student now carries grant %q in course %q", g, ul.Labels[v1alpha1.LabelCourse])
	}
}

// TestAdversaryPlaceholdersRaisedAroundTheWebhook: the number of
// placeholders is guarded, so try every other way of writing it as a
// course manager who may not create pods: server-side apply, a JSON
// patch, a schedule set where there was none, and lowering to 0 then
// raising again in two writes.
func TestAdversaryPlaceholdersRaisedAroundTheWebhook(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	loadRoles(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	if err := env.Client.Create(ctx, compliant(ns, "lab")); err != nil {
		t.Fatal(err)
	}
	const prof = "prof@uni.example"
	manager := clientAs(t, ns, prof, clusterRole("userland-course-manager"))
	waitAuthorized(t, manager, &v1alpha1.CourseList{}, client.InNamespace(ns))
	admitted := testobj.MakeCourse(ns, "db").Students("a@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	admitted.Spec.Schedule = &v1alpha1.CourseSchedule{
		Sessions:     []v1alpha1.CourseSession{{Day: ptr.To(v1alpha1.Weekday("Monday")), Start: "09:00", End: "10:30", TimeZone: "Europe/Berlin"}},
		Placeholders: ptr.To[int32](2),
	}
	if err := env.Client.Create(ctx, admitted); err != nil {
		t.Fatal(err)
	}
	bare := testobj.MakeCourse(ns, "bare").Students("a@uni.example").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	if err := manager.Create(ctx, bare); err != nil {
		t.Fatal(err)
	}
	key := func(name string) *v1alpha1.Course {
		return &v1alpha1.Course{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	apply := func(name string, n int32) error {
		body, _ := json.Marshal(map[string]any{
			"apiVersion": v1alpha1.GroupVersion.String(), "kind": "Course",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{"schedule": map[string]any{
				"sessions":     []any{map[string]any{"day": "Tuesday", "start": "09:00", "end": "10:00", "timeZone": "UTC"}},
				"placeholders": n,
			}},
		})
		return manager.Patch(ctx, key(name), client.RawPatch(types.ApplyPatchType, body), client.FieldOwner("sneaky"), client.ForceOwnership)
	}
	attacks := []struct {
		name    string
		attempt func() error
	}{
		{"server-side apply to 200", func() error { return apply("db", 200) }},
		{"JSON patch to 200", func() error {
			return manager.Patch(ctx, key("db"), client.RawPatch(types.JSONPatchType,
				[]byte(`[{"op":"replace","path":"/spec/schedule/placeholders","value":200}]`)))
		}},
		{"a schedule with placeholders where there was none", func() error { return apply("bare", 50) }},
		{"merge patch adding a schedule", func() error {
			return manager.Patch(ctx, key("bare"), client.RawPatch(types.MergePatchType,
				[]byte(`{"spec":{"schedule":{"sessions":[{"day":"Monday","start":"09:00","end":"10:00","timeZone":"UTC"}],"placeholders":7}}}`)))
		}},
	}
	for _, at := range attacks {
		if err := at.attempt(); err == nil {
			t.Errorf("HOLE: %s was admitted", at.name)
		} else if !strings.Contains(err.Error(), "may not create pods") {
			t.Errorf("%s: refused, but not by the placeholder rule: %v", at.name, err)
		}
	}
	// Lowered to 0 (allowed), raising back to 2 is a raise like any other.
	if err := manager.Patch(ctx, key("db"), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"schedule":{"placeholders":0}}}`))); err != nil {
		t.Fatalf("lowering: %v", err)
	}
	if err := manager.Patch(ctx, key("db"), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"schedule":{"placeholders":2}}}`))); err == nil {
		t.Error("HOLE: after lowering to 0 the manager put the admitted 2 back without the right to create pods")
	}
	// Deleting the schedule and recreating the course: a new course asks too.
	if err := manager.Delete(ctx, key("db")); err != nil {
		t.Fatal(err)
	}
	again := admitted.DeepCopy()
	again.ResourceVersion = ""
	if err := manager.Create(ctx, again); err == nil {
		t.Error("HOLE: recreated with 2 placeholders after deleting the course")
	}
}
