package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/echo"
	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/testenv"
)

// TestOIDCSignInThroughDex drives the whole authorization-code flow with
// PKCE through a real OpenID provider's login form.
func TestOIDCSignInThroughDex(t *testing.T) {
	f := setup(t, nil)
	ctx := context.Background()
	const email = "student@uni.example.ac.jp"
	ul := &v1alpha1.Userland{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "student"},
		Spec:       v1alpha1.UserlandSpec{User: email, TemplateRef: v1alpha1.TemplateReference{Name: "web"}},
	}
	if err := env.Client.Create(ctx, ul); err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, f.ns, "student", v1alpha1.PhaseReady)

	callback := f.gateway.URL + "/oauth2/callback"
	dexDir := t.TempDir()
	dex, err := testenv.StartDex(dexDir, callback, []testenv.DexUser{{Email: email, Username: "student", Password: "correct horse"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dex.Stop() })
	f.server.Provider, err = auth.NewOIDC(ctx, auth.OIDCConfig{
		Issuer: dex.Issuer, ClientID: dex.ClientID, ClientSecret: dex.ClientSecret,
		RedirectURL: callback, Scopes: []string{"openid", "email", "profile"},
	})
	if err != nil {
		t.Fatal(err)
	}

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar} // follows redirects between gateway and Dex
	envPath := "/u/" + f.ns + "/student/"
	resp, err := c.Get(f.gateway.URL + "/login?rd=" + url.QueryEscape(envPath))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	loginURL := resp.Request.URL.String()
	if !strings.HasPrefix(loginURL, dex.Issuer) || !strings.Contains(string(page), `name="password"`) {
		t.Fatalf("expected Dex's login form, got %s: %.200s", loginURL, page)
	}

	// A wrong password stays at Dex.
	resp, err = c.PostForm(loginURL, url.Values{"login": {email}, "password": {"wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if !strings.HasPrefix(resp.Request.URL.String(), dex.Issuer) {
		t.Fatalf("a wrong password left Dex for %s", resp.Request.URL)
	}

	resp, err = c.PostForm(loginURL, url.Values{"login": {email}, "password": {"correct horse"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != envPath {
		dexLog, _ := os.ReadFile(filepath.Join(dexDir, "dex.log"))
		t.Fatalf("after sign-in: %s at %s: %.300s\nDex log:\n%s", resp.Status, resp.Request.URL, body, dexLog)
	}
	var got echo.Reply
	if err := json.Unmarshal(body, &got); err != nil || got.User != email {
		t.Fatalf("the environment saw %s (%v)", body, err)
	}

	// A callback with a forged state is refused.
	resp, err = c.Get(f.gateway.URL + "/login?rd=/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	noRedirect := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noRedirect.Get(callback + "?state=forged&code=whatever")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("forged state: %s, want 400", resp.Status)
	}
}

// TestGitHubSignIn drives the GitHub OAuth flow through the gateway against
// a stand-in that enforces the registered callback, PKCE and single-use
// codes, and checks the org requirement end to end.
func TestGitHubSignIn(t *testing.T) {
	f := setup(t, nil)
	ctx := context.Background()
	ul := &v1alpha1.Userland{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "octocat"},
		Spec:       v1alpha1.UserlandSpec{User: "github:1000", TemplateRef: v1alpha1.TemplateReference{Name: "web"}}, // octocat's ID
	}
	if err := env.Client.Create(ctx, ul); err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, f.ns, "octocat", v1alpha1.PhaseReady)

	callback := f.gateway.URL + "/oauth2/callback"
	gh := testenv.StartGitHub(callback, []testenv.GitHubUser{
		{Login: "octocat", Password: "pw", Email: "octocat@uni.example", Verified: true, Orgs: []string{"uni"}},
		{Login: "outsider", Password: "pw", Email: "o@example", Verified: true},
	})
	t.Cleanup(gh.Close)
	var err error
	f.server.Provider, err = auth.NewGitHub(auth.GitHubConfig{
		ClientID: gh.ClientID, ClientSecret: gh.ClientSecret, RedirectURL: callback, URL: gh.URL, Orgs: []string{"uni"},
	})
	if err != nil {
		t.Fatal(err)
	}
	signIn := func(login string) (*http.Response, []byte) {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		resp, err := c.Get(f.gateway.URL + "/login?rd=" + url.QueryEscape("/u/"+f.ns+"/octocat/"))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		form := resp.Request.URL
		if !strings.HasPrefix(form.String(), gh.URL+"/login/oauth/authorize") {
			t.Fatalf("expected GitHub's authorize page, got %s (%s)", form, resp.Status)
		}
		resp, err = c.PostForm(gh.URL+form.Path, url.Values{"q": {form.RawQuery}, "login": {login}, "password": {"pw"}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp, body
	}

	resp, body := signIn("octocat")
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/u/"+f.ns+"/octocat/" {
		t.Fatalf("after sign-in: %s at %s: %.300s", resp.Status, resp.Request.URL, body)
	}
	var got echo.Reply
	if err := json.Unmarshal(body, &got); err != nil || got.User != "github:1000" {
		t.Fatalf("the environment saw %s (%v)", body, err)
	}

	before := f.metric(t, "userland_gateway_signin_failures_total", map[string]string{"reason": "not_allowed"})
	resp, body = signIn("outsider")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "organisation") {
		t.Errorf("outsider: %s %.200s, want 403 naming the organisation requirement", resp.Status, body)
	}
	if after := f.metric(t, "userland_gateway_signin_failures_total", map[string]string{"reason": "not_allowed"}); after != before+1 {
		t.Errorf("sign-in failures (not_allowed) went from %v to %v, want +1", before, after)
	}
}
