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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/devenv"
	"github.com/userland-dev/userland/internal/naming"
)

// session opens a fresh browser context (its own cookies) for one user.
func session(t *testing.T) context.Context {
	t.Helper()
	return sessionFor(t, 3*time.Minute)
}

// sessionFor is session with room for a test that takes real time.
func sessionFor(t *testing.T, limit time.Duration) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	ctx, timeout := context.WithTimeout(ctx, limit)
	t.Cleanup(func() { timeout(); cancel() })
	return ctx
}

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		screenshot(t, ctx, "failed-"+strings.ReplaceAll(t.Name(), "/", "-"))
		t.Fatalf("%s: %v", what, err)
	}
}

// eval returns a JavaScript expression's value.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript predicate in the page.
func waitFor(t *testing.T, ctx context.Context, what, predicate string, timeout time.Duration) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](predicate,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(timeout))); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
		screenshot(t, ctx, "failed-"+strings.ReplaceAll(t.Name(), "/", "-"))
		t.Fatalf("waiting for %s: %v\npage text:\n%.1500s", what, err, body)
	}
}

// screenshot saves the page as a test artifact.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(artifacts, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Logf("saving %s: %v", path, err)
		return
	}
	t.Logf("screenshot: %s", path)
}

// signIn goes to the dashboard, is sent to the sign-in form, and signs in.
func signIn(t *testing.T, ctx context.Context, user string) {
	t.Helper()
	do(t, ctx, "signing in as "+user,
		chromedp.Navigate(stack.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="username"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="username"]`), user),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), devenv.DemoPassword),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#signed-in-user")),
	)
	if got := eval[string](t, ctx, `document.getElementById("signed-in-user").textContent`); got != user {
		t.Fatalf("signed in as %q, want %q", got, user)
	}
}

func envName(user, template string) string {
	return naming.ReadableName(user, template)
}

func phaseIs(name, phase string) string {
	return fmt.Sprintf(`(function(){ var p = document.querySelector('li.env[data-name=%q] [data-field="phase"]'); return p && p.textContent === %q; })()`, name, phase)
}

// TestStudentStopsStartsAndOpensTheirEnvironment is a student's day: sign
// in, see their environments, stop one, start it again and watch it reach
// Ready without reloading, open it and use the app, WebSocket included.
func TestStudentStopsStartsAndOpensTheirEnvironment(t *testing.T) {
	ctx := session(t)
	signIn(t, ctx, "alice")
	vscode, lab := envName("alice", "vscode"), envName("alice", "jupyterlab")
	const title = "VS Code" // the template's display name: what the page calls it
	waitFor(t, ctx, "alice's environments to be Ready", phaseIs(vscode, "Ready")+" && "+phaseIs(lab, "Ready"), time.Minute)
	screenshot(t, ctx, "dashboard")

	do(t, ctx, "stopping", chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[aria-label="Stop %s"]`, title))),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	waitFor(t, ctx, "Stopped", phaseIs(vscode, "Stopped"), time.Minute)

	// A marker set on the page after the form's redirect survives only if
	// the page is not reloaded: progress arrives by the status script. The
	// stop's confirmation goes first, so the wait below sees the new page.
	_ = eval[bool](t, ctx, `(document.querySelector(".flash").remove(), true)`)
	do(t, ctx, "starting", chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[aria-label="Start %s"]`, title))),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	_ = eval[bool](t, ctx, `window.__userlandMarker = true`)
	waitFor(t, ctx, "Ready again", phaseIs(vscode, "Ready"), time.Minute)
	if !eval[bool](t, ctx, `window.__userlandMarker === true`) {
		t.Error("the page reloaded to show progress; the status script should update it in place")
	}
	shown := func(label string) bool {
		return eval[bool](t, ctx, fmt.Sprintf(`getComputedStyle(document.querySelector('button[aria-label="%s %s"]')).display !== "none"`, label, title))
	}
	if !shown("Stop") || shown("Start") {
		t.Errorf("a running environment shows Stop %v and Start %v, want only Stop", shown("Stop"), shown("Start"))
	}

	do(t, ctx, "opening", chromedp.Click(chromedp.CSS(fmt.Sprintf(`a[aria-label="Open %s"]`, title))),
		chromedp.WaitVisible(chromedp.CSS("#owner")))
	waitFor(t, ctx, "the demo app", `(document.getElementById("owner")||{}).textContent === "Environment demo/`+vscode+` of alice"`, 30*time.Second)
	waitFor(t, ctx, "the WebSocket echo", `Array.from(document.querySelectorAll("#echo-log li")).some(function(li){ return li.textContent === "echo: hello"; })`, 15*time.Second)
	// The environment is on its own origin, reached through the hand-off.
	_, port, _ := strings.Cut(strings.TrimPrefix(stack.URL, "http://"), ":")
	wantOrigin := "http://" + naming.HostLabel("demo", vscode) + ".localhost:" + port
	if got := eval[string](t, ctx, `location.origin + location.pathname`); got != wantOrigin+"/" {
		t.Errorf("opened %s, want %s/", got, wantOrigin)
	}
	screenshot(t, ctx, "demo-app")
	// A page on that origin cannot read the dashboard as alice: the
	// browser's same-origin policy blocks it, since the origins differ.
	_ = eval[bool](t, ctx, `(window.__read = "pending", fetch(`+fmt.Sprintf("%q", stack.URL+"/")+`, {credentials: "include"}).then(function(r){ return r.text(); }).then(function(){ window.__read = "read"; }, function(){ window.__read = "blocked"; }), true)`)
	waitFor(t, ctx, "the cross-origin read to settle", `window.__read !== "pending"`, 10*time.Second)
	if got := eval[string](t, ctx, `window.__read`); got != "blocked" {
		t.Errorf("the environment's page read the dashboard: %s", got)
	}
	if got := eval[string](t, ctx, `document.cookie`); strings.Contains(got, "userland_") {
		t.Errorf("the environment's page sees the gateway's cookies: %q", got)
	}

	// Back on the dashboard, "Last used" comes from the activity the
	// gateway recorded while she worked: it reads "now" (the status script
	// refreshes it; the first write is at the next flush, within seconds).
	start := time.Now()
	do(t, ctx, "back to the dashboard", chromedp.Navigate(stack.URL+"/"))
	lastUsed := fmt.Sprintf(`(document.querySelector('li.env[data-name=%q] [data-field="lastActivity"]')||{}).textContent`, vscode)
	waitFor(t, ctx, `"Last used: now"`, lastUsed+` === "now"`, time.Minute)
	t.Logf(`"Last used" read "now" %s after returning to the dashboard`, time.Since(start).Round(time.Millisecond))
}

// TestStudentCannotSeeAnotherStudentsEnvironment checks the dashboard
// and the environment's address both hide alice's from bob.
func TestStudentCannotSeeAnotherStudentsEnvironment(t *testing.T) {
	ctx := session(t)
	signIn(t, ctx, "bob")
	mine := envName("bob", "vscode")
	waitFor(t, ctx, "bob's environment", fmt.Sprintf(`document.querySelector('li.env[data-name=%q]') !== null`, mine), 10*time.Second)
	html := eval[string](t, ctx, `document.documentElement.outerHTML`)
	for _, other := range []string{envName("alice", "vscode"), envName("alice", "jupyterlab")} {
		if strings.Contains(html, other) {
			t.Errorf("bob's dashboard shows %s", other)
		}
	}
	do(t, ctx, "opening alice's address", chromedp.Navigate(stack.URL+"/u/demo/"+envName("alice", "vscode")+"/"))
	if text := eval[string](t, ctx, `document.body.innerText`); !strings.Contains(text, "Not found") || strings.Contains(text, "alice") {
		t.Errorf("bob at alice's address saw %q, want a plain 404", text)
	}
	if code := eval[bool](t, ctx, `document.querySelector('a[href="/dashboard/admin"]') === null`); !code {
		t.Error("a student is offered the admin view")
	}
}

// TestAdminImportsARoster uploads a 30-row class list with 3 bad rows and
// reads the report.
func TestAdminImportsARoster(t *testing.T) {
	ctx := session(t)
	signIn(t, ctx, "admin")
	var csv strings.Builder
	csv.WriteString("user,namespace,template\n")
	for i := 1; i <= 27; i++ {
		tmpl := "vscode"
		if i%2 == 0 {
			tmpl = "jupyterlab"
		}
		fmt.Fprintf(&csv, "student%02d@uni.example.ac.jp,demo,%s\n", i, tmpl)
	}
	csv.WriteString(",demo,vscode\n")                                      // no user
	csv.WriteString("student28@uni.example.ac.jp,demo,no-such-template\n") // unknown template
	csv.WriteString("student29@uni.example.ac.jp,Not_A_Namespace,vscode\n")
	path := filepath.Join(t.TempDir(), "roster.csv")
	if err := os.WriteFile(path, []byte(csv.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	do(t, ctx, "uploading the roster",
		chromedp.Navigate(stack.URL+"/dashboard/admin"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="roster"]`)),
		chromedp.SetUploadFiles(chromedp.CSS(`input[name="roster"]`), []string{path}),
		chromedp.Click(chromedp.CSS(`form[action="/dashboard/import"] button`)),
		chromedp.WaitVisible(chromedp.CSS("#import-summary")),
	)
	screenshot(t, ctx, "roster-import")
	if got := eval[string](t, ctx, `document.getElementById("import-summary").textContent`); got != "27 created, 0 already present, 3 rejected." {
		t.Errorf("summary %q", got)
	}
	rejected := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("tr.result-rejected")).map(function(r){ return r.innerText; })`)
	wantReasons := []string{"the user is empty", `template "no-such-template" not found`, `namespace "Not_A_Namespace" is not a valid name`}
	if len(rejected) != 3 {
		t.Fatalf("%d rejected rows shown, want 3: %q", len(rejected), rejected)
	}
	for i, want := range wantReasons {
		if !strings.Contains(rejected[i], want) {
			t.Errorf("rejected row %d says %q, want it to contain %q", i+1, rejected[i], want)
		}
	}

	var list v1alpha1.UserlandList
	if err := stack.Client.List(context.Background(), &list, client.InNamespace("demo")); err != nil {
		t.Fatal(err)
	}
	imported := 0
	for _, ul := range list.Items {
		if strings.HasPrefix(ul.Spec.User, "student") {
			imported++
		}
	}
	if imported != 27 {
		t.Errorf("%d imported Userlands in the cluster, want 27", imported)
	}
}

// unlabelled lists the page's controls that have no accessible name.
const unlabelled = `Array.from(document.querySelectorAll('button, select, input:not([type="hidden"]), a')).filter(function(e){
	return !(e.getAttribute("aria-label") || (e.labels && e.labels.length) || e.textContent.trim()); }).map(function(e){ return e.outerHTML; })`

// TestDashboardIsUsableAtPhoneWidthAndLabelled checks the pages fit a
// phone's width and every control has an accessible name.
func TestDashboardIsUsableAtPhoneWidthAndLabelled(t *testing.T) {
	for _, tc := range []struct{ user, path string }{{"alice", "/"}, {"admin", "/dashboard/admin"}} {
		t.Run(tc.user, func(t *testing.T) {
			ctx := session(t)
			do(t, ctx, "phone viewport", chromedp.EmulateViewport(375, 740))
			signIn(t, ctx, tc.user)
			do(t, ctx, "opening "+tc.path, chromedp.Navigate(stack.URL+tc.path), chromedp.WaitVisible(chromedp.CSS("main")))
			screenshot(t, ctx, "phone-"+tc.user)
			if over := eval[bool](t, ctx, `document.documentElement.scrollWidth > window.innerWidth`); over {
				t.Errorf("%s scrolls sideways at 375px", tc.path)
			}
			if missing := eval[[]string](t, ctx, unlabelled); len(missing) > 0 {
				t.Errorf("controls without an accessible name: %q", missing)
			}
		})
	}
}
