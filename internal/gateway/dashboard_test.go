package gateway_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
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
		waitPhase(t, f.ns, "alice", v1alpha1.PhaseStopped)
		start := stop("alice")
		start.Set("action", "start")
		if resp := postAction(t, alice, f, start, nil); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("start: %s", resp.Status)
		}
		waitPhase(t, f.ns, "alice", v1alpha1.PhaseReady)
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
	f := setup(t, nil)
	root := browser(t)
	rootToken := dashboardToken(t, root, f, "root", "root-pw")
	act := func(c *http.Client, token, verb string) *http.Response {
		form := url.Values{"action": {verb}, "namespace": {f.ns}, "name": {"alice"}, "csrf": {token}, "rd": {"/"}}
		return postAction(t, c, f, form, nil)
	}
	act(root, rootToken, "stop")
	waitPhase(t, f.ns, "alice", v1alpha1.PhaseStopped)

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
	waitPhase(t, f.ns, "alice", v1alpha1.PhaseReady)
}
