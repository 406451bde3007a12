package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/gateway/dashboard"
)

var csrfField = regexp.MustCompile(`name="csrf-token" content="([^"]+)"`)

// dashboardToken signs in and returns the CSRF token from the home page.
func dashboardToken(t *testing.T, c *http.Client, f fixture, user, pw string) string {
	t.Helper()
	signIn(t, c, f.gateway.URL, user, pw)
	resp, body := get(t, c, f.gateway.URL+"/", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("dashboard for %s: %s", user, resp.Status)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on %s's dashboard:\n%s", user, body)
	}
	return m[1]
}

func postAction(t *testing.T, c *http.Client, f fixture, form url.Values, header map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.gateway.URL+"/dashboard/action", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp
}

func suspended(t *testing.T, ns, name string) bool {
	t.Helper()
	var ul v1alpha1.Userland
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &ul); err != nil {
		t.Fatal(err)
	}
	return ul.Spec.Suspend
}

// TestDashboardActionsAreAuthorisedAndCSRFProtected drives the dashboard's
// forms over HTTP under the shipped gateway role: the owner and an admin
// may act, nobody else, and never without the session's token.
func TestDashboardActionsAreAuthorisedAndCSRFProtected(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	alice := browser(t)
	token := dashboardToken(t, alice, f, "alice", "alice-pw")

	_, home := get(t, alice, f.gateway.URL+"/", nil)
	if !strings.Contains(home, `data-name="alice"`) || strings.Contains(home, `data-name="bob"`) {
		t.Errorf("alice's dashboard should list her environment and not bob's:\n%.2000s", home)
	}
	stop := func(name string) url.Values {
		return url.Values{"action": {"stop"}, "namespace": {f.ns}, "name": {name}, "csrf": {token}, "rd": {"/"}}
	}

	t.Run("no token", func(t *testing.T) {
		form := stop("alice")
		form.Del("csrf")
		if resp := postAction(t, alice, f, form, nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("got %s, want 403", resp.Status)
		}
	})
	t.Run("another session's token", func(t *testing.T) {
		bob := browser(t)
		bobToken := dashboardToken(t, bob, f, "bob", "bob-pw")
		form := stop("alice")
		form.Set("csrf", bobToken)
		if resp := postAction(t, alice, f, form, nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("got %s, want 403", resp.Status)
		}
	})
	t.Run("cross-site post", func(t *testing.T) {
		resp := postAction(t, alice, f, stop("alice"), map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("got %s, want 403", resp.Status)
		}
	})
	if suspended(t, f.ns, "alice") {
		t.Fatal("a refused request stopped alice's environment")
	}
	t.Run("someone else's environment", func(t *testing.T) {
		resp := postAction(t, alice, f, stop("bob"), nil)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "error=") {
			t.Errorf("got %s to %q, want a redirect with an error", resp.Status, loc)
		}
		if suspended(t, f.ns, "bob") {
			t.Error("alice stopped bob's environment")
		}
	})
	t.Run("own environment: stop then start", func(t *testing.T) {
		if resp := postAction(t, alice, f, stop("alice"), nil); resp.StatusCode != http.StatusSeeOther || strings.Contains(resp.Header.Get("Location"), "error=") {
			t.Fatalf("stop: %s %s", resp.Status, resp.Header.Get("Location"))
		}
		f.waitPhase(t, "alice", v1alpha1.PhaseStopped)
		start := stop("alice")
		start.Set("action", "start")
		if resp := postAction(t, alice, f, start, nil); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("start: %s", resp.Status)
		}
		env.WaitPhase(t, f.ns, "alice", v1alpha1.PhaseReady)
	})
	t.Run("admin acts on anyone's environment", func(t *testing.T) {
		root := browser(t)
		rootToken := dashboardToken(t, root, f, "root", "root-pw")
		form := stop("bob")
		form.Set("csrf", rootToken)
		if resp := postAction(t, root, f, form, nil); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("admin stop: %s", resp.Status)
		}
		if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return suspended(t, f.ns, "bob"), nil
		}); err != nil {
			t.Error("the admin's stop did not suspend bob's environment")
		}
		_, admin := get(t, root, f.gateway.URL+"/dashboard/admin?namespace="+f.ns, nil)
		if !strings.Contains(admin, `data-name="alice"`) || !strings.Contains(admin, `data-name="bob"`) {
			t.Errorf("the admin view should list both environments:\n%.2000s", admin)
		}
		if resp, _ := get(t, alice, f.gateway.URL+"/dashboard/admin", nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("a student reached the admin view: %s", resp.Status)
		}
	})
}

// TestStaffSuspensionHoldsAgainstTheOwner: an administrator stops alice's
// environment in the dashboard; alice's Start is refused with the reason,
// and opening it does not wake it. The administrator's Start does.
func TestStaffSuspensionHoldsAgainstTheOwner(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	root := browser(t)
	rootToken := dashboardToken(t, root, f, "root", "root-pw")
	act := func(c *http.Client, token, verb string) *http.Response {
		form := url.Values{"action": {verb}, "namespace": {f.ns}, "name": {"alice"}, "csrf": {token}, "rd": {"/"}}
		return postAction(t, c, f, form, nil)
	}
	act(root, rootToken, "stop")
	f.waitPhase(t, "alice", v1alpha1.PhaseStopped)

	alice := browser(t)
	aliceToken := dashboardToken(t, alice, f, "alice", "alice-pw")
	resp := act(alice, aliceToken, "start")
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if loc == nil || !strings.Contains(loc.Query().Get("error"), "administrator or instructor") {
		t.Errorf("alice's Start answered %s to %s, want the reason", resp.Status, resp.Header.Get("Location"))
	}
	resp, body := get(t, alice, f.gateway.URL+"/u/"+f.ns+"/alice/", map[string]string{"Accept": "text/html"})
	t.Logf("opening the suspended environment: %s", resp.Status)
	if strings.Contains(body, `"user":"alice"`) {
		t.Error("the suspended environment answered")
	}
	// Give a wrongly issued wake time to land before checking.
	time.Sleep(2 * time.Second)
	if !suspended(t, f.ns, "alice") {
		t.Fatal("alice lifted the administrator's suspension")
	}
	act(root, rootToken, "start")
	env.WaitPhase(t, f.ns, "alice", v1alpha1.PhaseReady)
}

// TestIdleWarningOffersKeepRunning: near an idle stop the owner's
// dashboard warns and offers Keep running, which counts as use and ends
// the warning; nobody else may press it for them.
func TestIdleWarningOffersKeepRunning(t *testing.T) {
	f := setup(t, func(s *gateway.Server) {
		s.Activity.Now = func() time.Time { return clock.Now().Add(time.Second) }
		// The dashboard judges the warning on the controller's clock:
		// earlier tests move that shared fake clock ahead (an exhausted
		// budget, an hour), and against real time alice's idle stop would
		// then lie an hour away, outside any warning.
		s.Dashboard.Now = clock.Now
	})
	alice := browser(t)
	token := dashboardToken(t, alice, f, "alice", "alice-pw")
	// alice owns environments of earlier tests too: look at this one's card.
	card := func() string {
		_, home := get(t, alice, f.gateway.URL+"/", nil)
		_, rest, _ := strings.Cut(home, `data-namespace="`+f.ns+`" data-name="alice"`)
		c, _, _ := strings.Cut(rest, "</li>")
		return c
	}
	if home := card(); !strings.Contains(home, `data-field="idleWarning" hidden`) {
		t.Fatalf("an idle warning shows on a fresh environment:\n%.3000s", home)
	}

	// Three of the template's five minutes pass: the warning (by default
	// half the timeout) starts.
	clock.SetTime(clock.Now().Add(3 * time.Minute))
	var ul v1alpha1.Userland
	key := client.ObjectKey{Namespace: f.ns, Name: "alice"}
	if err := env.Client.Get(context.Background(), key, &ul); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ul.DeepCopy())
	ul.Annotations = map[string]string{"test/poke": "1"}
	if err := env.Client.Patch(context.Background(), &ul, patch); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, status := get(t, alice, f.gateway.URL+"/dashboard/status", map[string]string{"Accept": "application/json"})
		var entries []dashboard.StatusEntry
		if err := json.Unmarshal([]byte(status), &entries); err != nil {
			return false, err
		}
		for _, e := range entries {
			if e.Namespace == f.ns && e.Name == "alice" {
				return strings.HasPrefix(e.IdleStop, "in "), nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the status feed never announced the idle stop: %v", err)
	}
	if home := card(); strings.Contains(home, `data-field="idleWarning" hidden`) || !strings.Contains(home, "Keep running") {
		_ = env.Client.Get(context.Background(), key, &ul)
		t.Fatalf("no idle warning on the dashboard (status %+v):\n%.3000s", ul.Status, home)
	}

	keep := url.Values{"action": {"keep-running"}, "namespace": {f.ns}, "name": {"alice"}, "csrf": {token}, "rd": {"/"}}
	bob := browser(t)
	bobKeep := url.Values{"action": {"keep-running"}, "namespace": {f.ns}, "name": {"alice"}, "csrf": {dashboardToken(t, bob, f, "bob", "bob-pw")}, "rd": {"/"}}
	if resp := postAction(t, bob, f, bobKeep, nil); !strings.Contains(resp.Header.Get("Location"), "error=") {
		t.Errorf("bob kept alice's environment running: %s %s", resp.Status, resp.Header.Get("Location"))
	}
	if resp := postAction(t, alice, f, keep, nil); resp.StatusCode != http.StatusSeeOther || strings.Contains(resp.Header.Get("Location"), "error=") {
		t.Fatalf("keep running: %s %s", resp.Status, resp.Header.Get("Location"))
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, key, &ul); err != nil {
			return false, err
		}
		return ul.Status.IdleStopTime == nil && ul.Status.LastActivitySource == v1alpha1.ActivityKeepRunning, nil
	}); err != nil {
		t.Fatalf("Keep running did not end the warning: stop time %v, last use %s", ul.Status.IdleStopTime, ul.Status.LastActivitySource)
	}
	if ul.Status.Phase != v1alpha1.PhaseReady {
		t.Errorf("phase %s after Keep running", ul.Status.Phase)
	}
}

// eventLists counts the Event lists a reader makes in one namespace.
type eventLists struct {
	client.Reader
	namespace string
	n         atomic.Int32
}

func (r *eventLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.EventList); ok {
		o := (&client.ListOptions{}).ApplyOptions(opts)
		if o.Namespace == r.namespace {
			r.n.Add(1)
		}
	}
	return r.Reader.List(ctx, list, opts...)
}

// TestStatusPollsShareEventLists: the progress script polls the status
// feed every 2 s from every open tab, and each Event list goes to the API
// server, whose request budget all users share. However fast one user
// polls, an environment's events are listed at most once per few seconds.
func TestStatusPollsShareEventLists(t *testing.T) {
	counter := &eventLists{}
	f := setup(t, func(s *gateway.Server) {
		counter.Reader = s.Dashboard.Events
		s.Dashboard.Events = counter
	})
	counter.namespace = f.ns
	failPod(t, f.ns, "alice", corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "pull access denied"})
	env.WaitPhase(t, f.ns, "alice", v1alpha1.PhaseFailed)
	c := browser(t)
	signIn(t, c, f.gateway.URL, "alice", "alice-pw")
	// The cache shows the failure before the polls start.
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var ul v1alpha1.Userland
		err := f.server.Reader.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "alice"}, &ul)
		return err == nil && ul.Status.Phase == v1alpha1.PhaseFailed, nil
	}); err != nil {
		t.Fatal("the gateway's cache never showed alice's environment failed")
	}

	// An earlier Userland named alice (deleted, another user's) left a
	// newer event under the same name: not hers, never shown on her row.
	earlier := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "alice.earlier"},
		InvolvedObject: corev1.ObjectReference{Kind: "Userland", APIVersion: v1alpha1.GroupVersion.String(),
			Namespace: f.ns, Name: "alice", UID: "uid-of-an-earlier-alice"},
		Reason: "EarlierOnesEvent", Message: "about someone else's environment", Type: corev1.EventTypeNormal,
		LastTimestamp: metav1.NewTime(time.Now().Add(time.Hour)),
	}
	if err := env.Client.Create(context.Background(), earlier); err != nil {
		t.Fatal(err)
	}

	const polls = 40
	start := time.Now()
	var wg sync.WaitGroup
	var withEvent atomic.Int32
	for range 4 { // four tabs
		wg.Go(func() {
			for range polls / 4 {
				_, body := get(t, c, f.gateway.URL+"/dashboard/status", map[string]string{"Accept": "application/json"})
				var entries []dashboard.StatusEntry
				if err := json.Unmarshal([]byte(body), &entries); err != nil {
					t.Errorf("status feed: %v", err)
					return
				}
				for _, e := range entries {
					if e.Namespace == f.ns && e.Name == "alice" && e.Event != "" {
						withEvent.Add(1)
					}
					if strings.Contains(e.Event, "EarlierOnesEvent") {
						t.Errorf("alice's row shows an earlier namesake's event: %q", e.Event)
					}
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	// One list per eventTTL (5 s) of polling, and one more for a poll
	// landing on the boundary.
	allowed := int32(took/(5*time.Second)) + 2
	t.Logf("%d polls in %s made %d Event lists (at most %d allowed); %d answers carried the event",
		polls, took.Round(time.Millisecond), counter.n.Load(), allowed, withEvent.Load())
	if withEvent.Load() == 0 {
		t.Errorf("no answer carried alice's own event")
	}
	if n := counter.n.Load(); n == 0 || n > allowed {
		t.Errorf("%d polls made %d Event lists, want between 1 and %d", polls, n, allowed)
	}
}
