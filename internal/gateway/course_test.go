package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/gateway/authz"
	"github.com/userland-dev/userland/internal/gateway/proxy"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/testobj"
)

// trustedHeaders signs requests in by headers, as behind an
// authenticating proxy, so a test can be anyone in any group.
func trustedHeaders(s *gateway.Server) {
	s.Header = &auth.TrustedHeader{UserHeader: "X-Auth-User", EmailHeader: "X-Auth-Email", GroupsHeader: "X-Auth-Groups",
		Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	s.Proxy = proxy.New([]string{"X-Auth-User", "X-Auth-Email", "X-Auth-Groups"})
}

func as(user, groups string) map[string]string {
	return map[string]string{"X-Auth-User": user, "X-Auth-Groups": groups, "Accept": "text/html"}
}

// TestCourseFromAGroup: 200 members of a course's student group each get
// the course's environment at sign-in, labelled with the course; staff
// reach every one of them through the gateway, a fellow student reaches
// none; beyond the running limit a student gets their place in line.
func TestCourseFromAGroup(t *testing.T) {
	t.Parallel()
	f := setup(t, trustedHeaders)
	ctx := context.Background()
	lab := testobj.MakeTemplate(f.ns, "lab").Container("web").Idle(5 * time.Minute).Obj()
	course := testobj.MakeCourse(f.ns, "db").StudentGroups("db-students").StaffGroups("db-staff").
		Template("lab", v1alpha1.ProvisionOnSignIn).MaxRunning(1).Obj()
	for _, o := range []client.Object{lab, course} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	f.waitCached(t, lab, course)

	start := time.Now()
	for i := range 200 {
		id := session.Identity{User: fmt.Sprintf("g%03d", i), Groups: []string{"db-students"}}
		if n, err := f.server.Provisioner.Provision(ctx, id); err != nil || n != 1 {
			t.Fatalf("provisioning %s: %d created, %v", id.User, n, err)
		}
	}
	t.Logf("200 group members provisioned at sign-in in %s", time.Since(start).Round(time.Millisecond))
	var list v1alpha1.UserlandList
	if err := env.Client.List(ctx, &list, client.InNamespace(f.ns), client.MatchingLabels{v1alpha1.LabelCourse: "db"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 200 {
		t.Fatalf("%d Userlands carry the course's label, want 200", len(list.Items))
	}
	for _, ul := range list.Items {
		if got := ul.Annotations[v1alpha1.AnnotationEnrolledBy]; got != "student-group:db-students" {
			t.Fatalf("%s enrolled by %q", ul.Name, got)
		}
	}
	// Somebody outside the group gets nothing.
	if n, err := f.server.Provisioner.Provision(ctx, session.Identity{User: "outsider", Groups: []string{"other"}}); err != nil || n != 0 {
		t.Fatalf("an outsider got %d environments (%v)", n, err)
	}

	key := types.NamespacedName{Namespace: f.ns, Name: courseEnv("db", "g000")}
	if _, reason := f.server.Policy.Check(ctx, f.server.Reader, session.Identity{User: "ta", Groups: []string{"db-staff"}}, key); reason != authz.CourseStaff {
		t.Errorf("staff's access to a student's environment: %q, want %q", reason, authz.CourseStaff)
	}
	if _, reason := f.server.Policy.Check(ctx, f.server.Reader, session.Identity{User: "g001", Groups: []string{"db-students"}}, key); reason != "" {
		t.Errorf("a fellow student's access: %q, want none", reason)
	}

	url := f.gateway.URL + "/u/" + f.ns + "/" + courseEnv("db", "g000") + "/"
	// A fellow student is told nothing exists.
	if resp, _ := get(t, http.DefaultClient, url, as("g001", "db-students")); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a fellow student opening g000's environment: %s, want 404", resp.Status)
	}
	// The instructor opens it: it starts (the one place), and is served.
	err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		resp, body := get(t, http.DefaultClient, url, as("ta", "db-staff"))
		return resp.StatusCode == http.StatusOK && strings.Contains(body, `"user":"ta"`), nil
	})
	if err != nil {
		t.Fatalf("staff never reached the student's environment: %v", err)
	}
	// The place is taken: the next student waits in line, told so.
	var body string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, body = get(t, http.DefaultClient, f.gateway.URL+"/u/"+f.ns+"/"+courseEnv("db", "g001")+"/", as("g001", "db-students"))
		return strings.Contains(body, "number 1 in line"), nil
	})
	if err != nil {
		t.Fatalf("the second student was not shown their place in line; last page:\n%s", body)
	}
}

// TestCourseBeforeItsTerm: before the term a student's page says when it
// starts, and nothing is started.
func TestCourseBeforeItsTerm(t *testing.T) {
	t.Parallel()
	f := setup(t, trustedHeaders)
	ctx := context.Background()
	lab := testobj.MakeTemplate(f.ns, "lab").Container("web").Obj()
	start := clock.Now().Add(7 * 24 * time.Hour).Truncate(time.Second)
	course := testobj.MakeCourse(f.ns, "art").Term(start, start.Add(90*24*time.Hour)).StudentGroups("art").
		Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	for _, o := range []client.Object{lab, course} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var body string
	var resp *http.Response
	err := wait.PollUntilContextTimeout(ctx, time.Second, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, _ = f.server.Provisioner.Provision(ctx, session.Identity{User: "early", Groups: []string{"art"}})
		resp, body = get(t, http.DefaultClient, f.gateway.URL+"/u/"+f.ns+"/"+courseEnv("art", "early")+"/", as("early", "art"))
		return strings.Contains(body, "has not started yet"), nil
	})
	if err != nil {
		t.Fatalf("no word of the term's start; last page %v:\n%s", resp.Status, body)
	}
	if !strings.Contains(body, start.UTC().Format(time.RFC3339)) {
		t.Errorf("the page does not say when the term starts (%s):\n%s", start.UTC().Format(time.RFC3339), body)
	}
	var ul v1alpha1.Userland
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: courseEnv("art", "early")}, &ul); err != nil {
		t.Fatal(err)
	}
	if ul.Status.LastActivityTime != nil {
		t.Errorf("visiting before the term recorded activity at %v", ul.Status.LastActivityTime)
	}
}

// courseEnv is the name a course's environment of user from the template
// "lab" gets when nobody has it.
func courseEnv(courseName, user string) string {
	return naming.CourseCandidateNames(courseName, user, v1alpha1.TemplateReference{Name: "lab"})[0]
}

// TestCourseStaffReachOnlyWhatTheCourseMadeForStudents: staff reach the
// environment the course made for a student, and nothing else that
// carries the course's label or belongs to its people: not another staff
// member's, not the student's own environment from the same template
// (which sign-in leaves out of the course), not one an earlier version
// adopted into the course.
func TestCourseStaffReachOnlyWhatTheCourseMadeForStudents(t *testing.T) {
	t.Parallel()
	f := setup(t, trustedHeaders)
	ctx := context.Background()
	lab := testobj.MakeTemplate(f.ns, "lab").Container("web").Obj()
	crs := testobj.MakeCourse(f.ns, "db").Students("s", "s2").Staff("ta", "ta2").Template("lab", v1alpha1.ProvisionOnSignIn).Obj()
	own := testobj.MakeUserland(f.ns, "s-lab", "s", "lab").Obj()
	// s2's environment was adopted into the course by an earlier version:
	// it carries the label, not the course's mark. It stays s2's course
	// environment (s2 gets no second one) but staff do not reach it.
	legacy := testobj.MakeUserland(f.ns, "s2-lab", "s2", "lab").Obj()
	legacy.Labels = map[string]string{v1alpha1.LabelCourse: "db"}
	legacy.Annotations = map[string]string{v1alpha1.AnnotationEnrolledBy: course.BasisStudentUser}
	for _, o := range []client.Object{lab, crs, own, legacy} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	f.waitCached(t, lab, crs, own, legacy)
	for user, want := range map[string]int{"s": 1, "ta": 1, "ta2": 1, "s2": 0} {
		if n, err := f.server.Provisioner.Provision(ctx, session.Identity{User: user}); err != nil || n != want {
			t.Fatalf("provisioning %s: %d created (want %d), %v", user, n, want, err)
		}
	}
	var mine v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(own), &mine); err != nil {
		t.Fatal(err)
	}
	if mine.Labels[v1alpha1.LabelCourse] != "" {
		t.Errorf("the student's own environment was taken into the course at sign-in: %v", mine.Labels)
	}
	reach := map[string]authz.Reason{}
	for _, name := range []string{courseEnv("db", "s"), courseEnv("db", "ta2"), "s-lab", "s2-lab"} {
		_, reason := f.server.Policy.Check(ctx, f.server.Reader, session.Identity{User: "ta"}, types.NamespacedName{Namespace: f.ns, Name: name})
		reach[name] = reason
	}
	want := map[string]authz.Reason{courseEnv("db", "s"): authz.CourseStaff, courseEnv("db", "ta2"): "", "s-lab": "", "s2-lab": ""}
	if diff := cmp.Diff(want, reach); diff != "" {
		t.Errorf("what staff reach (-want +got):\n%s", diff)
	}
}
