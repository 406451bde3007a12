//go:build realnode

package realnode_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/testobj"
)

// The addresses the browser test uses: the README's url (the chart's
// gateway URL, which the install sets) and its environment domain, the
// README's example of one origin per environment
// (https://<name>--<namespace>.apps.example.edu).
const (
	mainHost   = "userland.example.edu"
	baseDomain = "apps.example.edu"
	browserNS  = "browser"
)

// browserApp is one sample app and how a person uses it in the browser.
type browserApp struct {
	name, file string
	// prepare puts what the person will open into the claim, through the
	// running pod (may be nil).
	prepare func(ctx context.Context, t *testing.T, n *realnode.Node, pod *corev1.Pod)
	// open waits, in a tab at the environment's URL, until the app is
	// ready for the person.
	open func(t *testing.T, tab context.Context, envURL string)
	// use does something in the app that leaves content in the claim,
	// and checks that it did (pod is the running one).
	use func(ctx context.Context, t *testing.T, n *realnode.Node, tab context.Context, envURL string, pod *corev1.Pod)
	// answers opens the environment after the wake and waits until the
	// app shows the content use left (pod is the new one).
	answers func(t *testing.T, tab context.Context, envURL string, pod *corev1.Pod)
}

// TestBrowserOnRealNode is a student's day with each real app, in
// Chromium, through the in-cluster gateway the README's install made:
// sign in as a static user, open the environment on its own origin, use
// the app, close the tab and leave it until the controller stops it for
// idleness (phase Stopped, reason Idle, no pod), then open it again and
// see it wake and the app answer with what was left there.
//
// The install is the README's, plus one value: gateway.baseDomain, so
// that each environment has its own origin, as the chart recommends
// (without it every environment shares the dashboard's origin by path).
// The sample Templates (VS Code, Jupyter, phpMyAdmin + MariaDB) run the
// local builds of their images (USERLAND_APP_IMAGES, as
// TestSampleAppsOnRealNode) with a one-minute idle timeout, the shortest
// the API allows, and their presets' activity rules unchanged. The
// gateway's activity interval stays the chart's (1m). In front of the
// gateway is an ingress stand-in (startIngress says what and why).
func TestBrowserOnRealNode(t *testing.T) {
	archives, overrides := appImages(t)
	r := installChart(t, archives, "gateway.baseDomain="+baseDomain)
	n, c := r.n, r.n.Cluster.Client
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	for _, name := range []string{controllerDeployment, gatewayDeployment} {
		availableDeployment(ctx, t, n, releaseNamespace, name)
	}
	// The API server's own Pod Security admission enforces the level on
	// every pod in the namespace, as in TestSampleAppsOnRealNode.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: browserNS, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": enforcedLevel,
	}}}); err != nil {
		t.Fatal(err)
	}

	apps := []browserApp{vscodeApp(), jupyterApp(), phpMyAdminApp()}
	templates := map[string]*v1alpha1.Template{}
	for _, app := range apps {
		tmpl := sampleTemplate(t, app.file)
		overrideImages(t, &tmpl.Spec.PodTemplate.Spec, overrides)
		tmpl.Namespace = browserNS
		if tmpl.Spec.Idle == nil {
			t.Fatalf("the sample %s has no idle spec", app.file)
		}
		tmpl.Spec.Idle.Timeout = metav1.Duration{Duration: time.Minute}
		tmpl.Spec.Idle.WarnBefore = nil
		// The webhook may still be starting: the first create waits.
		createAdmitted(ctx, t, c, tmpl, "the sample "+app.file, 3*time.Minute)
		templates[app.name] = tmpl
	}

	ingress := startIngress(t, n, gatewayService+"."+releaseNamespace+".svc.cluster.local:80", mainHost, baseDomain)
	browser := startChromium(t, ingress, mainHost, baseDomain)
	t.Logf("ingress stand-in for https://%s and https://*.%s on %s", mainHost, baseDomain, ingress)

	// The apps side by side (as many at once as go test's -parallel,
	// GOMAXPROCS by default), each in its own browser context: the idle
	// waits overlap.
	t.Run("apps", func(t *testing.T) {
		for _, app := range apps {
			t.Run(app.name, func(t *testing.T) {
				t.Parallel()
				browserCycle(ctx, t, n, browser, app, templates[app.name])
			})
		}
	})
}

// browserCycle is one app's sign-in → open → use → idle stop → wake. The
// environment is made when its cycle begins: made earlier, it would be
// stopped for idleness before anyone opened it.
func browserCycle(ctx context.Context, t *testing.T, n *realnode.Node, browser context.Context, app browserApp, tmpl *v1alpha1.Template) {
	ul := testobj.MakeUserland(browserNS, app.name, chartUser, tmpl.Name).Obj()
	for _, v := range tmpl.Spec.Volumes {
		localVolume(ctx, t, n, controller.ClaimName(ul, v.Name), browserNS, v.Size)
	}
	createAdmitted(ctx, t, n.Cluster.Client, ul, app.name+"'s Userland", time.Minute)
	created := time.Now()
	pod, err := readyAppPod(ctx, n, browserNS, app.name, "")
	if err != nil {
		t.Fatal(err)
	}
	ul = userland(ctx, t, n, app.name)
	for deadline := time.Now().Add(time.Minute); ul.Status.Phase != v1alpha1.PhaseReady || ul.Status.URL == ""; ul = userland(ctx, t, n, app.name) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not Ready with a URL a minute after its pod: %+v", app.name, ul.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("TIMING %s: pod Ready %s after its Userland was created (the pod's own record: created → Ready %s)",
		app.name, time.Since(created).Round(10*time.Millisecond), createdToReady(pod))
	// The apps' paths below are relative to it.
	envURL := strings.TrimSuffix(ul.Status.URL, "/") + "/"
	if u, err := url.Parse(envURL); err != nil || u.Scheme != "https" || u.Host != naming.HostLabel(browserNS, app.name)+"."+baseDomain {
		t.Fatalf("%s's status.url is %q, want https://%s.%s/ (its own origin)", app.name, envURL, naming.HostLabel(browserNS, app.name), baseDomain)
	}
	if app.prepare != nil {
		app.prepare(ctx, t, n, pod)
	}

	session := browserSession(t, browser, 15*time.Minute)
	start := time.Now()
	browserSignIn(t, session, chartUser, chartPassword)
	t.Logf("TIMING %s: signed in as %s at https://%s in %s", app.name, chartUser, mainHost, time.Since(start).Round(10*time.Millisecond))

	// A tab in the same browser context (the same cookies), closed when
	// the person is done, as a student closes it and walks away.
	tab, closeTab := chromedp.NewContext(session)
	start = time.Now()
	browse(t, tab, "opening "+envURL, chromedp.Navigate(envURL))
	app.open(t, tab, envURL)
	t.Logf("TIMING %s: first open of %s (the gateway's hand-off to the environment's own origin, then the app) in %s",
		app.name, envURL, time.Since(start).Round(10*time.Millisecond))
	start = time.Now()
	app.use(ctx, t, n, tab, envURL, pod)
	t.Logf("%s: used in %s", app.name, time.Since(start).Round(10*time.Millisecond))
	closeTab()
	closed := time.Now()

	st := waitIdleStopped(ctx, t, n, app.name)
	t.Logf("TIMING %s: idle stop (phase Stopped, reason Idle, pod gone) %s after the tab was closed (timeout 1m; last use recorded at %v, %s before the close, as %s)",
		app.name, time.Since(closed).Round(time.Second), st.LastActivityTime.Format(time.TimeOnly),
		closed.Sub(st.LastActivityTime.Time).Round(time.Second), st.LastActivitySource)

	tab, closeTab = chromedp.NewContext(session)
	defer closeTab()
	start = time.Now()
	browse(t, tab, "opening "+envURL+" again", chromedp.Navigate(envURL))
	app.open(t, tab, envURL)
	opened := time.Since(start)
	woken, err := readyAppPod(ctx, n, browserNS, app.name, pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	app.answers(t, tab, envURL, woken)
	t.Logf("TIMING %s: wake → the app answered %s after it was opened again, and showed what was left in it after %s (new pod %s: created → Ready %s)",
		app.name, opened.Round(10*time.Millisecond), time.Since(start).Round(10*time.Millisecond), woken.Name, createdToReady(woken))
	if st := userland(ctx, t, n, app.name).Status; st.Phase != v1alpha1.PhaseReady {
		t.Errorf("%s is %s (%s) after the wake, want Ready", app.name, st.Phase, st.StoppedReason)
	}
}

// browserSignIn goes to the dashboard, is sent to the sign-in form, and signs
// in as a static user.
func browserSignIn(t *testing.T, ctx context.Context, user, password string) {
	t.Helper()
	browse(t, ctx, "signing in as "+user,
		chromedp.Navigate("https://"+mainHost+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="username"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="username"]`), user),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), password),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#signed-in-user")),
	)
	if got := evalIn[string](t, ctx, `document.getElementById("signed-in-user").textContent`); got != user {
		t.Fatalf("signed in as %q, want %q", got, user)
	}
}

// userland reads a Userland through the API server.
func userland(ctx context.Context, t *testing.T, n *realnode.Node, name string) *v1alpha1.Userland {
	t.Helper()
	var ul v1alpha1.Userland
	if err := n.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: browserNS, Name: name}, &ul); err != nil {
		t.Fatal(err)
	}
	return &ul
}

// waitIdleStopped waits (up to 4 minutes) until the controller has
// stopped the environment for idleness and its pod is gone.
func waitIdleStopped(ctx context.Context, t *testing.T, n *realnode.Node, name string) v1alpha1.UserlandStatus {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		st := userland(ctx, t, n, name).Status
		var pods corev1.PodList
		if err := n.Cluster.Client.List(ctx, &pods, client.InNamespace(browserNS), client.MatchingLabels{v1alpha1.LabelUserland: name}); err != nil {
			t.Fatal(err)
		}
		if st.Phase == v1alpha1.PhaseStopped && len(pods.Items) == 0 {
			if st.StoppedReason != v1alpha1.StoppedIdle {
				t.Fatalf("%s was stopped for %q, want Idle", name, st.StoppedReason)
			}
			if st.LastActivityTime == nil {
				t.Fatalf("%s was stopped for idleness with no activity recorded: %+v", name, st)
			}
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not stopped with its pod gone 4 minutes after it was left, with a 1-minute idle timeout: phase %s (%s), %d pods, last use %v by %s",
				name, st.Phase, st.StoppedReason, len(pods.Items), st.LastActivityTime, st.LastActivitySource)
		}
		time.Sleep(time.Second)
	}
}
