package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/testobj"
)

var formToken = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// courseFixture is a course "db" in a gateway fixture: alice a student,
// bob and carol staff, the template "lab" up front. alice also has her
// own environment "alice" outside the course. The gateway maps names with
// the prefix idp: (users and groups), as an OIDC install would.
type courseFixture struct {
	fixture
	course *v1alpha1.Course
	page   string
}

func setupCourse(t *testing.T) courseFixture {
	t.Helper()
	f := setup(t, func(s *gateway.Server) {
		s.Dashboard.RBACNames = gateway.Options{RBACUserPrefix: "idp:", RBACGroupPrefix: "idp:"}.RBACNames()
	})
	ctx := context.Background()
	lab := testobj.MakeTemplate(f.ns, "lab").Container("web").Idle(5 * time.Minute).Obj()
	crs := testobj.MakeCourse(f.ns, "db").Students("alice").Staff("bob", "carol").Template("lab", v1alpha1.ProvisionUpFront).Obj()
	for _, o := range []client.Object{lab, crs} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	f.waitCached(t, lab, crs)
	return courseFixture{fixture: f, course: crs, page: fmt.Sprintf("%s/dashboard/course?namespace=%s&name=db", f.gateway.URL, f.ns)}
}

// liveCourse reads the course from the API server.
func (f courseFixture) liveCourse(t *testing.T) *v1alpha1.Course {
	t.Helper()
	var c v1alpha1.Course
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(f.course), &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// coursePage signs c in as user and returns the course page and its form
// token.
func (f courseFixture) coursePage(t *testing.T, c *http.Client) (string, string) {
	t.Helper()
	start := time.Now()
	resp, body := get(t, c, f.page, nil)
	t.Logf("course page in %s", time.Since(start).Round(time.Millisecond))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("course page: %s\n%s", resp.Status, body)
	}
	m := formToken.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no form token on the course page:\n%s", body)
	}
	return body, m[1]
}

// postCourse sends the course page's forms as a browser (or a forger
// holding the session's token) would: multipart with a roster when csv
// is set, a plain form otherwise.
func (f courseFixture) postCourse(t *testing.T, c *http.Client, token, action, csv string) (*http.Response, string) {
	t.Helper()
	fields := map[string]string{"csrf": token, "namespace": f.ns, "name": "db", "action": action}
	var req *http.Request
	if csv != "" {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for k, v := range fields {
			_ = mw.WriteField(k, v)
		}
		fw, _ := mw.CreateFormFile("roster", "roster.csv")
		_, _ = fw.Write([]byte(csv))
		_ = mw.Close()
		req, _ = http.NewRequest(http.MethodPost, f.gateway.URL+"/dashboard/course", &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
	} else {
		form := url.Values{}
		for k, v := range fields {
			form.Set(k, v)
		}
		req, _ = http.NewRequest(http.MethodPost, f.gateway.URL+"/dashboard/course", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	t.Logf("POST %s as the course page: %s in %s", action, resp.Status, time.Since(start).Round(time.Millisecond))
	return resp, body.String()
}

// bindCourseManager binds userland-course-manager in the fixture's
// namespace to an RBAC user name.
func bindCourseManager(t *testing.T, ns, user string) {
	t.Helper()
	b := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manager-" + strings.ReplaceAll(user, ":", "-")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-course-manager"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if err := env.Client.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// TestStaffCannotChangeTheRoster is the confused deputy, as an attacker
// would try it: bob is listed as the course's staff and holds no
// Kubernetes role. The page offers him no roster upload and says why; his
// forged uploads and whole-course actions, with his session's valid
// token, are refused with 403 and change nothing; alice's own environment
// stays hidden from him.
func TestStaffCannotChangeTheRoster(t *testing.T) {
	t.Parallel()
	f := setupCourse(t)
	bob := browser(t)
	signIn(t, bob, f.gateway.URL, "bob", "bob-pw")
	page, token := f.coursePage(t, bob)
	for _, offer := range []string{`name="roster"`, `id="start-all"`, `id="stop-all"`, `id="restart-all"`} {
		if strings.Contains(page, offer) {
			t.Errorf("bob, staff without the course-manager role, is offered %s", offer)
		}
	}
	if !strings.Contains(page, `id="cannot-change"`) || !strings.Contains(page, "course-manager role") || !strings.Contains(page, "idp:bob") {
		t.Errorf("the page does not tell bob why he cannot import (and under which name to bind him):\n%s", page)
	}

	before := f.liveCourse(t)
	for _, tc := range []struct{ action, csv string }{
		{"import", "user,role\nmallory,staff\nroot,student\n"},
		{"start", ""}, {"stop", ""}, {"restart", ""},
	} {
		resp, body := f.postCourse(t, bob, token, tc.action, tc.csv)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "course-manager role") || strings.Contains(body, "<") {
			t.Errorf("forged %s: %s %q, want 403 with a plain message", tc.action, resp.Status, body)
		}
	}
	if diff := cmp.Diff(before.Spec, f.liveCourse(t).Spec); diff != "" {
		t.Errorf("the forged posts changed the course (-before +after):\n%s", diff)
	}
	// Not the resourceVersion: the controller writes the course's status
	// as its environments start. Anything the gateway could write shows
	// in the generation (the spec) or the metadata.
	if after := f.liveCourse(t); after.Generation != before.Generation ||
		!maps.Equal(after.Labels, before.Labels) || !maps.Equal(after.Annotations, before.Annotations) {
		t.Errorf("the course was written (generation %d, then %d; labels %v, then %v; annotations %v, then %v)",
			before.Generation, after.Generation, before.Labels, after.Labels, before.Annotations, after.Annotations)
	}
	if resp, _ := get(t, bob, f.gateway.URL+"/u/"+f.ns+"/alice/", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob opening alice's own environment: %s, want 404", resp.Status)
	}
	if suspended(t, f.ns, "alice") {
		t.Error("alice's own environment was stopped")
	}
}

// TestCourseManagerImportsUnderThePrefixedName: RBAC decides with the
// gateway's prefixes. A RoleBinding to carol's IdP name grants nothing;
// one to idp:carol lets her import a roster and act on everyone.
func TestCourseManagerImportsUnderThePrefixedName(t *testing.T) {
	t.Parallel()
	f := setupCourse(t)
	carol := browser(t)
	signIn(t, carol, f.gateway.URL, "carol", "carol-pw")
	_, token := f.coursePage(t, carol)

	bindCourseManager(t, f.ns, "carol")
	// Once RBAC grants the unprefixed name (asked directly), the gateway,
	// which asks for idp:carol, still refuses.
	reviewer := access.Reviewer{Client: env.Client}
	change := access.Action{Verb: "update", Group: "userland.dev", Resource: "courses", Namespace: f.ns, Name: "db"}
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return reviewer.Allowed(ctx, access.Subject{User: "carol"}, change)
	})
	if err != nil {
		t.Fatalf("RBAC never granted carol the course: %v", err)
	}
	if resp, body := f.postCourse(t, carol, token, "import", "user,role\ndave,student\n"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("import with a binding to the unprefixed name: %s %q, want 403", resp.Status, body)
	}

	bindCourseManager(t, f.ns, "idp:carol")
	start := time.Now()
	var page string
	// RBAC's authorizer learns of a new binding from its informer.
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		page, _ = f.coursePage(t, carol)
		return strings.Contains(page, `name="roster"`), nil
	})
	if err != nil {
		t.Fatalf("the upload never appeared for the course manager:\n%s", page)
	}
	t.Logf("the binding took effect after %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(page, `id="start-all"`) || strings.Contains(page, `id="cannot-change"`) {
		t.Errorf("the course manager's page lacks the whole-course actions:\n%s", page)
	}
	resp, body := f.postCourse(t, carol, token, "import", "user,role\ndave,student\nerin,staff\n")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "2 added, 0 already present, 0 rejected.") {
		t.Fatalf("import: %s\n%s", resp.Status, body)
	}
	got := f.liveCourse(t).Spec
	if diff := cmp.Diff([]string{"alice", "dave"}, got.Students.Users); diff != "" {
		t.Errorf("students (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"bob", "carol", "erin"}, got.Staff.Users); diff != "" {
		t.Errorf("staff (-want +got):\n%s", diff)
	}
	if resp, _ := f.postCourse(t, carol, token, "stop", ""); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("stop all: %s, want 303", resp.Status)
	}
}

// TestCourseChangeCheckFailingDenies: when the API server will not answer
// whether someone may change the course, nothing changes and the page
// says to try again.
func TestCourseChangeCheckFailingDenies(t *testing.T) {
	t.Parallel()
	f := setupCourse(t)
	bindCourseManager(t, f.ns, "idp:carol")
	// A reviewer whose identity may not create SubjectAccessReviews: every
	// check is an error from the API server.
	noRights, err := client.New(env.ConfigFor("no-rights"), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	f.server.Dashboard.Access = access.Reviewer{Client: noRights}
	carol := browser(t)
	signIn(t, carol, f.gateway.URL, "carol", "carol-pw")
	page, token := f.coursePage(t, carol)
	if strings.Contains(page, `name="roster"`) || !strings.Contains(page, "could not be checked") {
		t.Errorf("with the check failing the page offers the upload or does not say why:\n%s", page)
	}
	before := f.liveCourse(t)
	resp, body := f.postCourse(t, carol, token, "import", "user,role\nmallory,staff\n")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "nothing was changed") {
		t.Errorf("import with the check failing: %s %q, want 503 saying nothing changed", resp.Status, body)
	}
	if after := f.liveCourse(t); after.Generation != before.Generation ||
		!maps.Equal(after.Labels, before.Labels) || !maps.Equal(after.Annotations, before.Annotations) {
		t.Error("the course was written although the check failed")
	}
}

// TestStaffAndStudentsStillActOnEnvironments: what being listed gives is
// kept. Staff without any role stop and start an environment the course
// made for a student; the student stops and starts their own.
func TestStaffAndStudentsStillActOnEnvironments(t *testing.T) {
	t.Parallel()
	f := setupCourse(t)
	ctx := context.Background()
	var name string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var list v1alpha1.UserlandList
		if err := env.Client.List(ctx, &list, client.InNamespace(f.ns), client.MatchingLabels{v1alpha1.LabelCourse: "db"}); err != nil {
			return false, err
		}
		for _, ul := range list.Items {
			if ul.Spec.User == "alice" && ul.Annotations[v1alpha1.AnnotationProvisionedByCourse] != "" {
				name = ul.Name
			}
		}
		return name != "", nil
	})
	if err != nil {
		t.Fatal("the course never provisioned alice's environment")
	}
	f.waitCached(t, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}})

	act := func(c *http.Client, token, verb string) {
		t.Helper()
		form := url.Values{"action": {verb}, "namespace": {f.ns}, "name": {name}, "csrf": {token}, "rd": {"/"}}
		start := time.Now()
		resp := postAction(t, c, f.fixture, form, nil)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || strings.Contains(loc, "error=") {
			t.Fatalf("%s %s: %s to %q", verb, name, resp.Status, loc)
		}
		t.Logf("%s %s in %s", verb, name, time.Since(start).Round(time.Millisecond))
	}
	waitSuspended := func(want bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return suspended(t, f.ns, name) == want, nil
		})
		if err != nil {
			t.Fatalf("%s: spec.suspend never became %v", name, want)
		}
	}

	bob := browser(t)
	bobToken := dashboardToken(t, bob, f.fixture, "bob", "bob-pw")
	act(bob, bobToken, "stop")
	waitSuspended(true)
	act(bob, bobToken, "start")
	waitSuspended(false)

	alice := browser(t)
	aliceToken := dashboardToken(t, alice, f.fixture, "alice", "alice-pw")
	act(alice, aliceToken, "stop")
	waitSuspended(true)
	act(alice, aliceToken, "start")
	waitSuspended(false)
}

// countingClient counts the SubjectAccessReviews asked through it.
type countingClient struct {
	client.Client
	reviews atomic.Int32
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.reviews.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}

// TestCourseImportOf500RowsAsksOnce: the permission is the course's, so a
// roster import asks the API server once however long the roster is.
// Measured: the import's time, and one review's.
func TestCourseImportOf500RowsAsksOnce(t *testing.T) {
	t.Parallel()
	f := setupCourse(t)
	bindCourseManager(t, f.ns, "idp:carol")
	counting := &countingClient{Client: f.server.Dashboard.Access.Client}
	f.server.Dashboard.Access = access.Reviewer{Client: counting}
	carol := browser(t)
	signIn(t, carol, f.gateway.URL, "carol", "carol-pw")
	var token string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var page string
		page, token = f.coursePage(t, carol)
		return strings.Contains(page, `name="roster"`), nil
	})
	if err != nil {
		t.Fatal("the course manager was never offered the upload")
	}
	var csv strings.Builder
	csv.WriteString("user,role\n")
	for i := range 500 {
		fmt.Fprintf(&csv, "student%03d@uni.example.ac.jp,student\n", i)
	}
	counting.reviews.Store(0)
	start := time.Now()
	resp, body := f.postCourse(t, carol, token, "import", csv.String())
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "500 added") {
		t.Fatalf("500-row import: %s\n%.500s", resp.Status, body)
	}
	if n := counting.reviews.Load(); n != 1 {
		t.Errorf("a 500-row import asked %d SubjectAccessReviews, want 1", n)
	}
	const reviews = 50
	start = time.Now()
	for range reviews {
		if _, err := f.server.Dashboard.Access.Allowed(context.Background(), access.Subject{User: "idp:carol"},
			access.Action{Verb: "update", Group: "userland.dev", Resource: "courses", Namespace: f.ns, Name: "db"}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("500-row course import in %s with 1 SubjectAccessReview; one review takes %s (mean of %d)",
		took.Round(time.Millisecond), (time.Since(start) / reviews).Round(10*time.Microsecond), reviews)
}

// TestRosterImportNeedsCreateOnUserlands: an admin by --admin-groups
// alone imports nothing through the gateway; with RBAC's create on
// Userlands in the namespace (under the prefixed name) they do.
func TestRosterImportNeedsCreateOnUserlands(t *testing.T) {
	t.Parallel()
	f := setupCourse(t)
	root := browser(t)
	token := dashboardToken(t, root, f.fixture, "root", "root-pw")
	importRows := func() (*http.Response, string) {
		t.Helper()
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("csrf", token)
		fw, _ := mw.CreateFormFile("roster", "roster.csv")
		_, _ = fmt.Fprintf(fw, "user,namespace,template\nzed,%s,web\n", f.ns)
		_ = mw.Close()
		req, _ := http.NewRequest(http.MethodPost, f.gateway.URL+"/dashboard/import", &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		start := time.Now()
		resp, err := root.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		t.Logf("roster import: %s in %s", resp.Status, time.Since(start).Round(time.Millisecond))
		return resp, body.String()
	}
	zed := func() int {
		var list v1alpha1.UserlandList
		if err := env.Client.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ul := range list.Items {
			if ul.Spec.User == "zed" {
				n++
			}
		}
		return n
	}
	if _, body := importRows(); !strings.Contains(body, "0 created, 0 already present, 1 rejected.") || zed() != 0 {
		t.Errorf("an admin without RBAC imported (%d Userlands for zed):\n%.1500s", zed(), body)
	}
	b := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "root-user-manager"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-user-manager"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "idp:admins"}},
	}
	if err := env.Client.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	var body string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, body = importRows()
		return strings.Contains(body, "1 created"), nil
	})
	if err != nil || zed() != 1 {
		t.Errorf("with user-manager bound to the prefixed group the import did not create zed's environment (%d):\n%.1500s", zed(), body)
	}
}
