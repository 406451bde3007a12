package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/devenv"
	"github.com/userland-dev/userland/internal/testobj"
	"github.com/userland-dev/userland/internal/userlands"
)

// pageChecks asserts what every page of the gateway promises at phone
// width: the shared stylesheet applied (under the page's own
// Content-Security-Policy), landmarks, an h1, every control named, and
// no sideways scrolling.
func pageChecks(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	if !eval[bool](t, ctx, `getComputedStyle(document.querySelector("header")).borderBottomStyle === "solid" && getComputedStyle(document.body).margin === "0px"`) {
		t.Errorf("%s: the stylesheet does not apply", page)
	}
	if !eval[bool](t, ctx, `!!(document.querySelector("main#main") && document.querySelector("nav[aria-label]") && document.querySelector("h1"))`) {
		t.Errorf("%s: missing main, nav or h1", page)
	}
	if missing := eval[[]string](t, ctx, unlabelled); len(missing) > 0 {
		t.Errorf("%s: controls without an accessible name: %q", page, missing)
	}
	if eval[bool](t, ctx, `document.documentElement.scrollWidth > window.innerWidth`) {
		t.Errorf("%s scrolls sideways at 375px", page)
	}
}

// TestPagesShareTheDashboardsLookAndSayWhatHappens opens, at phone width,
// the pages a student meets outside the dashboard: sign-in (with a wrong
// password), the progress page of an environment no node can take (the
// template's display name and the controller's words in an alert region,
// never the object's name) and "not found".
func TestPagesShareTheDashboardsLookAndSayWhatHappens(t *testing.T) {
	ctx := session(t)
	do(t, ctx, "phone viewport", chromedp.EmulateViewport(375, 740))
	do(t, ctx, "opening the sign-in page", chromedp.Navigate(stack.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`input[name="username"]`)))
	pageChecks(t, ctx, "sign-in")
	screenshot(t, ctx, "signin")
	do(t, ctx, "a wrong password",
		chromedp.SendKeys(chromedp.CSS(`input[name="username"]`), "bob"),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "wrong"),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[role="alert"]`)))
	pageChecks(t, ctx, "sign-in, refused")
	signIn(t, ctx, "bob")

	bg := context.Background()
	tmpl := testobj.MakeTemplate(devenv.DemoNamespace, "gpu-lab").DisplayName("GPU Lab").
		NodeSelector(map[string]string{"example.com/gpu": "none-in-this-cluster"}).Obj()
	if err := stack.Client.Create(bg, tmpl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Client.Delete(bg, tmpl) })
	ul := testobj.MakeUserland(devenv.DemoNamespace, "", "bob", "gpu-lab").Obj()
	name, created, err := userlands.Create(bg, stack.Client, stack.Client, ul)
	if err != nil || !created {
		t.Fatalf("creating bob's GPU Lab: %v (created %v)", err, created)
	}
	t.Cleanup(func() {
		_ = stack.Client.Delete(bg, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: devenv.DemoNamespace, Name: name}})
	})
	if name != "bob-gpu-lab" {
		t.Errorf("bob's environment from gpu-lab is named %q, want bob-gpu-lab", name)
	}
	// The controller's plain words for a pod no node can take.
	var cur v1alpha1.Userland
	var message string
	deadline := time.Now().Add(time.Minute)
	for message == "" || cur.Status.URL == "" || cur.Status.Phase != v1alpha1.PhaseFailed {
		if time.Now().After(deadline) {
			t.Fatalf("bob's GPU Lab never reported why it waits: %+v", cur.Status)
		}
		time.Sleep(200 * time.Millisecond)
		if err := stack.Client.Get(bg, client.ObjectKey{Namespace: devenv.DemoNamespace, Name: name}, &cur); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			message = c.Message
		}
	}
	t.Logf("the controller says: %s", message)
	do(t, ctx, "opening bob's GPU Lab", chromedp.Navigate(cur.Status.URL), chromedp.WaitVisible(chromedp.CSS("h1")))
	waitFor(t, ctx, "the progress page", `document.querySelector("h1").textContent === "GPU Lab cannot start"`, 10*time.Second)
	waitFor(t, ctx, "the controller's message in the live region",
		`(function(){ var s = document.querySelector('[role="alert"]'); return !!s && s.textContent.indexOf(`+jsString(message)+`) >= 0 && s.textContent.indexOf("Failed") >= 0; })()`, 10*time.Second)
	if text := eval[string](t, ctx, `document.body.innerText`); strings.Contains(text, name) || !strings.Contains(text, "for bob") {
		t.Errorf("the progress page shows the object name or not whose it is:\n%s", text)
	}
	pageChecks(t, ctx, "progress")
	screenshot(t, ctx, "progress")

	do(t, ctx, "a page that does not exist", chromedp.Navigate(stack.URL+"/no-such-page"), chromedp.WaitVisible(chromedp.CSS("h1")))
	if h1 := eval[string](t, ctx, `document.querySelector("h1").textContent`); h1 != "Not found" {
		t.Errorf("not-found page heading %q", h1)
	}
	pageChecks(t, ctx, "not found")
}

// jsString quotes s for JavaScript.
func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// TestCoursePageNotFoundIsTheGatewaysOwn: teacher instructs the demo
// namespace but is not staff of this course, so its page is not found to
// him, on the gateway's own page (heading, stylesheet, landmarks), not
// Go's bare "404 page not found"; and it says nothing of the course.
func TestCoursePageNotFoundIsTheGatewaysOwn(t *testing.T) {
	bg := context.Background()
	crs := testobj.MakeCourse(devenv.DemoNamespace, "e2e-not-staff").Students("alice").Template("vscode", v1alpha1.ProvisionOnSignIn).Obj()
	crs.Spec.DisplayName = "Not teacher's course (e2e)"
	if err := stack.Client.Create(bg, crs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Client.Delete(bg, crs) })
	ctx := sessionFor(t, 2*time.Minute)
	signIn(t, ctx, "teacher")
	do(t, ctx, "teacher opening a course he is not staff of",
		chromedp.Navigate(stack.URL+"/dashboard/course?namespace="+devenv.DemoNamespace+"&name="+crs.Name),
		chromedp.WaitVisible(chromedp.CSS("h1")))
	if h1 := eval[string](t, ctx, `document.querySelector("h1").textContent`); h1 != "Not found" {
		t.Errorf("course page for a non-member: heading %q, want Not found", h1)
	}
	if text := eval[string](t, ctx, `document.body.innerText`); strings.Contains(text, crs.Spec.DisplayName) || strings.Contains(text, crs.Name) {
		t.Errorf("the not-found page tells of the course:\n%s", text)
	}
	pageChecks(t, ctx, "course not found")
}
