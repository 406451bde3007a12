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
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestInstructorRunsACourseFromItsPage is a course's first week in a
// browser: the instructor (carol, staff of this course only, bound to the
// course-manager role in its namespace) finds it on her home page, sees
// the roster with each student's environment, imports a late student, starts everyone (the running limit queues the rest and
// the page shows the queue) and stops everyone. A student sees the course
// and what it offers, and cannot open its page.
func TestInstructorRunsACourseFromItsPage(t *testing.T) {
	ctx := context.Background()
	const ns, name = "demo", "e2e-db"
	crs := testobj.MakeCourse(ns, name).Students("bob", "cs1@uni.example.ac.jp", "cs2@uni.example.ac.jp").Staff("carol").
		Template("jupyterlab", v1alpha1.ProvisionUpFront).MaxRunning(1).Obj()
	crs.Spec.DisplayName = "Databases (e2e)"
	// Listed staff see the page; importing and starting everyone take the
	// course-manager role (RBAC's update on the course).
	manager := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-carol"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-course-manager"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"}},
	}
	for _, o := range []client.Object{crs, manager} {
		if err := stack.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = stack.Client.Delete(ctx, manager)
		_ = stack.Client.Delete(ctx, crs)
		_ = stack.Client.DeleteAllOf(ctx, &v1alpha1.Userland{}, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCourse: name})
	})
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var c v1alpha1.Course
		return stack.Client.Get(ctx, client.ObjectKeyFromObject(crs), &c) == nil && c.Status.Provisioned == 3, nil
	})
	if err != nil {
		t.Fatal("the course's three students were never provisioned")
	}

	staff := sessionFor(t, 4*time.Minute)
	signIn(t, staff, "carol")
	do(t, staff, "opening the course from the home page",
		chromedp.WaitVisible(chromedp.CSS(`li.course[data-name="e2e-db"] a`)),
		chromedp.Click(chromedp.CSS(`li.course[data-name="e2e-db"] a`)),
		chromedp.WaitVisible(chromedp.CSS("#course-counts")),
	)
	users := eval[[]string](t, staff, `Array.from(document.querySelectorAll("tr.member")).map(function(r){ return r.dataset.user; })`)
	for _, want := range []string{"bob", "cs1@uni.example.ac.jp", "cs2@uni.example.ac.jp"} {
		if !contains(users, want) {
			t.Errorf("the roster lacks %s: %q", want, users)
		}
	}
	screenshot(t, staff, "course-page")

	path := filepath.Join(t.TempDir(), "late.csv")
	if err := os.WriteFile(path, []byte("user,role\ncs3@uni.example.ac.jp,student\nbob\nx@uni.example.ac.jp,auditor\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	do(t, staff, "importing a late student",
		chromedp.SetUploadFiles(chromedp.CSS(`input[name="roster"]`), []string{path}),
		chromedp.Click(chromedp.CSS(`form[enctype="multipart/form-data"] button`)),
		chromedp.WaitVisible(chromedp.CSS("#import-summary")),
	)
	if got := eval[string](t, staff, `document.getElementById("import-summary").textContent`); got != "1 added, 1 already present, 1 rejected." {
		t.Errorf("import summary %q", got)
	}
	reload := func(what, predicate string) {
		t.Helper()
		var last string
		err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(context.Context) (bool, error) {
			if _, err := chromedp.Run(staff, chromedp.Navigate(stack.URL+"/dashboard/course?namespace=demo&name=e2e-db")); err != nil {
				return false, err
			}
			last = eval[string](t, staff, "document.body.innerText")
			return eval[bool](t, staff, predicate), nil
		})
		if err != nil {
			screenshot(t, staff, "failed-course-"+strings.ReplaceAll(what, " ", "-"))
			t.Fatalf("waiting for %s: %v\npage:\n%.2000s", what, err, last)
		}
	}
	reload("the late student's environment", `!!document.querySelector('tr.member[data-user="cs3@uni.example.ac.jp"][data-name]')`)

	do(t, staff, "starting everyone", chromedp.Click(chromedp.CSS("#start-all")), chromedp.WaitVisible(chromedp.CSS(".flash")))
	// Each queued environment's place is written when it is reconciled,
	// so for a moment two can say the same place: wait for the settled
	// line, then check it.
	reload("the queue", `!!document.getElementById("queue") && document.querySelectorAll("ol.queue li").length === 3 &&
		Array.from(document.querySelectorAll("ol.queue li")).every(function(l, i){ return l.textContent.indexOf("number " + (i+1) + " in line") >= 0; })`)
	queue := eval[[]string](t, staff, `Array.from(document.querySelectorAll("ol.queue li")).map(function(l){ return l.textContent; })`)
	for i, entry := range queue {
		if !strings.Contains(entry, fmt.Sprintf("number %d in line", i+1)) {
			t.Errorf("queue entry %d says %q", i+1, entry)
		}
	}
	screenshot(t, staff, "course-queue")

	do(t, staff, "stopping everyone", chromedp.Click(chromedp.CSS("#stop-all")), chromedp.WaitVisible(chromedp.CSS(".flash")))
	reload("every environment stopped", `Array.from(document.querySelectorAll('tr.member[data-name] [data-field="phase"]')).every(function(p){ return p.textContent === "Stopped"; })`)

	student := session(t)
	signIn(t, student, "bob")
	do(t, student, "seeing the course", chromedp.WaitVisible(chromedp.CSS(`li.course[data-name="e2e-db"]`)))
	card := eval[string](t, student, `document.querySelector('li.course[data-name="e2e-db"]').innerText`)
	if !strings.Contains(card, "Databases (e2e)") || !strings.Contains(card, "Offers: JupyterLab") {
		t.Errorf("the student's course card says %q", card)
	}
	if eval[bool](t, student, `!!document.querySelector('li.course[data-name="e2e-db"] a')`) {
		t.Error("a student is offered the course page")
	}
	do(t, student, "opening the course page as a student", chromedp.Navigate(stack.URL+"/dashboard/course?namespace=demo&name=e2e-db"))
	if body := eval[string](t, student, "document.body.innerText"); !strings.Contains(body, "404") && !strings.Contains(strings.ToLower(body), "not found") {
		t.Errorf("a student opened the course page:\n%.500s", body)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
