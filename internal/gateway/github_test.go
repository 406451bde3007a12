package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/echo"
	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/testenv"
)

// TestGitHubRenameDoesNotHandOverEnvironments: GitHub frees a login when
// its owner renames the account, and anyone may register it next. Were
// the login the identity, the newcomer would get the owner's
// environments. The numeric user ID is: the owner keeps them under the new
// login, and the newcomer, signing in with the old login, gets none, not
// even one made under the login before the gateway keyed on IDs.
func TestGitHubRenameDoesNotHandOverEnvironments(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	ctx := context.Background()
	for _, ul := range []*v1alpha1.Userland{
		{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "octo"},
			Spec: v1alpha1.UserlandSpec{User: "github:1001", TemplateRef: v1alpha1.TemplateReference{Name: "web"}}},
		// Made when the login was the identity, and not migrated.
		{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "legacy"},
			Spec: v1alpha1.UserlandSpec{User: "octocat", TemplateRef: v1alpha1.TemplateReference{Name: "web"}}},
	} {
		if err := env.Client.Create(ctx, ul); err != nil {
			t.Fatal(err)
		}
	}
	env.WaitPhase(t, f.ns, "octo", v1alpha1.PhaseReady)
	env.WaitPhase(t, f.ns, "legacy", v1alpha1.PhaseReady)

	callback := f.gateway.URL + "/oauth2/callback"
	gh := testenv.StartGitHub(callback, []testenv.GitHubUser{
		// The owner, account 1001, renamed from octocat.
		{Login: "octo-renamed", ID: 1001, Password: "pw", Orgs: []string{"uni"}},
		// Whoever registered the freed login, in the same organisation.
		{Login: "octocat", ID: 2002, Password: "pw", Orgs: []string{"uni"}},
	})
	t.Cleanup(gh.Close)
	var err error
	f.server.Provider, err = auth.NewGitHub(auth.GitHubConfig{
		ClientID: gh.ClientID, ClientSecret: gh.ClientSecret, RedirectURL: callback, URL: gh.URL, Orgs: []string{"uni"},
	})
	if err != nil {
		t.Fatal(err)
	}
	signIn := func(login string) *http.Client {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		resp, err := c.Get(f.gateway.URL + "/login?rd=/")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		form := resp.Request.URL
		if resp, err = c.PostForm(gh.URL+form.Path, url.Values{"q": {form.RawQuery}, "login": {login}, "password": {"pw"}}); err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `<strong id="signed-in-user">`+login+`</strong>`) {
			t.Fatalf("%s's sign-in ended at %s (%s), want the dashboard naming them by login: %.500s", login, resp.Request.URL, resp.Status, body)
		}
		return c
	}
	open := func(c *http.Client, name string) (int, string) {
		resp, body := get(t, c, f.gateway.URL+"/u/"+f.ns+"/"+name+"/", nil)
		return resp.StatusCode, body
	}

	owner := signIn("octo-renamed")
	code, body := open(owner, "octo")
	var seen echo.Reply
	if err := json.Unmarshal([]byte(body), &seen); code != http.StatusOK || err != nil || seen.User != "github:1001" {
		t.Fatalf("the owner opening their environment: %d %.300s, want 200 as github:1001", code, body)
	}
	newcomer := signIn("octocat")
	for _, name := range []string{"octo", "legacy"} {
		if code, body := open(newcomer, name); code != http.StatusNotFound {
			t.Errorf("the newcomer with the freed login opened %s: %d %.200s, want 404", name, code, body)
		}
	}
}
