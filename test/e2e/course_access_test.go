package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// forgeCourseImport is what an attacker runs in their own signed-in page:
// the course page's import, sent by hand with the session's valid token
// (same origin, so neither the token nor the origin check stops it). It
// leaves "<status> <body>" in window.__forged.
const forgeCourseImport = `(function(){
	window.__forged = "pending";
	var fd = new FormData();
	fd.append("csrf", document.querySelector('meta[name="csrf-token"]').content);
	fd.append("namespace", %q);
	fd.append("name", %q);
	fd.append("action", %q);
	fd.append("roster", new Blob([%q], {type: "text/csv"}), "roster.csv");
	fetch("/dashboard/course", {method: "POST", body: fd, credentials: "same-origin", redirect: "manual"})
		.then(function(r){ return r.text().then(function(t){ window.__forged = r.status + " " + t; }); },
		      function(e){ window.__forged = "error " + e; });
	return true;
})()`

// TestCourseStaffCannotChangeTheRoster is the hole, in a browser, as bob
// would try it: bob is listed only as staff of a course and holds no
// Kubernetes role. The course page offers him no upload and no "start
// all", saying why; a hand-made upload adding alice as a student and
// mallory as staff, carrying his session's valid token, gets 403 and the
// course in the API server is unchanged; alice's environment still
// answers him 404. What being staff gives keeps working: bob starts and
// stops a student's environment from the page. teacher, whom dev mode
// binds to userland-course-manager in demo, imports a roster there.
func TestCourseStaffCannotChangeTheRoster(t *testing.T) {
	ctx := context.Background()
	const ns, name = "demo", "e2e-staff-only"
	student := "cs10@uni.example.ac.jp"
	crs := testobj.MakeCourse(ns, name).Students(student).Staff("bob", "teacher").
		Template("jupyterlab", v1alpha1.ProvisionUpFront).Obj()
	crs.Spec.DisplayName = "Staff only (e2e)"
	if err := stack.Client.Create(ctx, crs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stack.Client.Delete(ctx, crs)
		_ = stack.Client.DeleteAllOf(ctx, &v1alpha1.Userland{}, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCourse: name})
	})
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var c v1alpha1.Course
		return stack.Client.Get(ctx, client.ObjectKeyFromObject(crs), &c) == nil && c.Status.Provisioned == 1, nil
	})
	if err != nil {
		t.Fatal("the course's student was never provisioned")
	}
	t.Logf("the course's student provisioned in %s", time.Since(start).Round(time.Millisecond))
	page := stack.URL + "/dashboard/course?namespace=" + ns + "&name=" + name

	bob := sessionFor(t, 4*time.Minute)
	signIn(t, bob, "bob")
	start = time.Now()
	do(t, bob, "opening the course from bob's home page",
		chromedp.WaitVisible(chromedp.CSS(`li.course[data-name="`+name+`"] a`)),
		chromedp.Click(chromedp.CSS(`li.course[data-name="`+name+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS("#course-counts")),
	)
	t.Logf("course page shown to bob in %s", time.Since(start).Round(time.Millisecond))
	screenshot(t, bob, "course-staff-without-role")
	for _, offer := range []string{`input[name="roster"]`, "#start-all", "#stop-all", "#restart-all"} {
		if eval[bool](t, bob, fmt.Sprintf(`!!document.querySelector(%q)`, offer)) {
			t.Errorf("bob, staff without the course-manager role, is offered %s", offer)
		}
	}
	why := eval[string](t, bob, `(document.getElementById("cannot-change")||{}).textContent || ""`)
	if !strings.Contains(why, "course-manager role") || !strings.Contains(why, "bob") {
		t.Errorf("the page does not tell bob why he cannot import: %q", why)
	}

	var before v1alpha1.Course
	if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(crs), &before); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_ = eval[bool](t, bob, fmt.Sprintf(forgeCourseImport, ns, name, "import", "user,role\nalice,student\nmallory,staff\n"))
	waitFor(t, bob, "the forged upload's answer", `window.__forged !== "pending"`, 30*time.Second)
	forged := eval[string](t, bob, `window.__forged`)
	t.Logf("forged upload answered in %s: %.300s", time.Since(start).Round(time.Millisecond), forged)
	if !strings.HasPrefix(forged, "403 ") || !strings.Contains(forged, "course-manager role") || strings.Contains(forged, "<") {
		t.Errorf("the forged upload got %q, want 403 with a plain message", forged)
	}
	_ = eval[bool](t, bob, fmt.Sprintf(forgeCourseImport, ns, name, "start", ""))
	waitFor(t, bob, "the forged start-all's answer", `window.__forged !== "pending"`, 30*time.Second)
	if forged := eval[string](t, bob, `window.__forged`); !strings.HasPrefix(forged, "403 ") {
		t.Errorf("the forged start-all got %q, want 403", forged)
	}
	var after v1alpha1.Course
	if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(crs), &after); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before.Spec, after.Spec); diff != "" || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the forged requests changed the course (resourceVersion %s → %s; -before +after):\n%s", before.ResourceVersion, after.ResourceVersion, diff)
	}
	aliceLab := envName("alice", "jupyterlab")
	do(t, bob, "opening alice's environment", chromedp.Navigate(stack.URL+"/u/demo/"+aliceLab+"/"))
	if text := eval[string](t, bob, `document.body.innerText`); !strings.Contains(text, "Not found") || strings.Contains(text, "alice") {
		t.Errorf("bob at alice's address saw %q, want a plain 404", text)
	}

	// Staff still act on a student's environment the course made (staff
	// get the up-front template too; theirs are not on the page).
	var envs v1alpha1.UserlandList
	if err := stack.Client.List(ctx, &envs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCourse: name}); err != nil {
		t.Fatal(err)
	}
	var studentEnv, teacherEnv string
	for _, ul := range envs.Items {
		switch ul.Spec.User {
		case student:
			studentEnv = ul.Name
		case "teacher":
			teacherEnv = ul.Name
		}
	}
	if studentEnv == "" {
		t.Fatalf("the course made no environment for %s", student)
	}
	if teacherEnv != "" && eval[bool](t, bob, fmt.Sprintf(`!!document.querySelector('tr.member[data-name=%q]')`, teacherEnv)) {
		t.Error("bob's course page shows another staff member's environment")
	}
	label := student + "'s JupyterLab"
	row := fmt.Sprintf(`tr.member[data-name=%q]`, studentEnv)
	phase := func(want string) string {
		return fmt.Sprintf(`(document.querySelector(%q)||{textContent:""}).textContent === %q`, row+` [data-field="phase"]`, want)
	}
	reloadUntil := func(what, predicate string) {
		t.Helper()
		start := time.Now()
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
			if _, err := chromedp.Run(bob, chromedp.Navigate(page)); err != nil {
				return false, err
			}
			return eval[bool](t, bob, predicate), nil
		})
		if err != nil {
			screenshot(t, bob, "failed-course-access-"+strings.ReplaceAll(what, " ", "-"))
			t.Fatalf("waiting for %s: %v\npage:\n%.2000s", what, err, eval[string](t, bob, "document.body.innerText"))
		}
		t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
	}
	reloadUntil("the student's environment on the page", "!!document.querySelector('"+row+"')")
	do(t, bob, "starting the student's environment",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[aria-label="Start %s"]`, label))),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	reloadUntil("the student's environment running", phase("Ready"))
	do(t, bob, "stopping the student's environment",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[aria-label="Stop %s"]`, label))),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	reloadUntil("the student's environment stopped", phase("Stopped"))

	// The course manager (dev mode's RoleBinding for the teachers group)
	// imports a roster from the page.
	teacher := sessionFor(t, 3*time.Minute)
	signIn(t, teacher, "teacher")
	path := filepath.Join(t.TempDir(), "more.csv")
	if err := os.WriteFile(path, []byte("user,role\ncs11@uni.example.ac.jp,student\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	do(t, teacher, "importing as the course manager",
		chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.CSS(`input[name="roster"]`)),
		chromedp.SetUploadFiles(chromedp.CSS(`input[name="roster"]`), []string{path}),
		chromedp.Click(chromedp.CSS(`form[enctype="multipart/form-data"] button`)),
		chromedp.WaitVisible(chromedp.CSS("#import-summary")),
	)
	t.Logf("the course manager's import answered in %s", time.Since(start).Round(time.Millisecond))
	if got := eval[string](t, teacher, `document.getElementById("import-summary").textContent`); got != "1 added, 0 already present, 0 rejected." {
		t.Errorf("import summary %q", got)
	}
	if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(crs), &after); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{student, "cs11@uni.example.ac.jp"}, after.Spec.Students.Users); diff != "" {
		t.Errorf("students after the course manager's import (-want +got):\n%s", diff)
	}
}
