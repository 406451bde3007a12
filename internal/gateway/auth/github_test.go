package auth_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/testenv"
)

const githubCallback = "https://userland.example/oauth2/callback"

// authorizeAt signs login in at the stand-in's form and returns the
// callback's state and code.
func authorizeAt(t *testing.T, target, login, password string) (state, code string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(u.Scheme+"://"+u.Host+u.Path, url.Values{"q": {u.RawQuery}, "login": {login}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %s", resp.Status)
	}
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return back.Query().Get("state"), back.Query().Get("code")
}

func TestGitHubSignIn(t *testing.T) {
	gh := testenv.StartGitHub(githubCallback, []testenv.GitHubUser{
		{Login: "alice", ID: 101, Password: "pw", Email: "alice@uni.example", Verified: true, Orgs: []string{"uni"}},
		{Login: "bob", ID: 102, Password: "pw", Email: "bob@elsewhere.example", Verified: false, Orgs: []string{"uni"}, Teams: []string{"uni/staff"}},
		{Login: "mallory", ID: 103, Password: "pw", Email: "m@example", Verified: true, Pending: []string{"uni"}},
		{Login: "eve", ID: 104, Password: "pw", Email: "eve@example", Verified: true},
	})
	t.Cleanup(gh.Close)
	tests := map[string]struct {
		login       string
		orgs, teams []string
		identity    string
		want        session.Identity
		wantErr     error
	}{
		"org member with a verified address": {
			login: "alice", orgs: []string{"uni"},
			want: session.Identity{User: "github:101", Name: "alice", Email: "alice@uni.example", Groups: []string{"uni"}},
		},
		"an unverified address is not used": {
			login: "bob", orgs: []string{"uni"},
			want: session.Identity{User: "github:102", Name: "bob", Groups: []string{"uni"}},
		},
		"team membership becomes a group": {
			login: "bob", orgs: []string{"uni"}, teams: []string{"uni/staff"},
			want: session.Identity{User: "github:102", Name: "bob", Groups: []string{"uni", "uni/staff"}},
		},
		"team member alone is enough": {
			login: "bob", teams: []string{"uni/staff"},
			want: session.Identity{User: "github:102", Name: "bob", Groups: []string{"uni/staff"}},
		},
		"anyone when no org is required": {
			login: "eve",
			want:  session.Identity{User: "github:104", Name: "eve", Email: "eve@example"},
		},
		"the login, for installations not yet migrated": {
			login: "alice", orgs: []string{"uni"}, identity: auth.GitHubByLogin,
			want: session.Identity{User: "alice", Email: "alice@uni.example", Groups: []string{"uni"}},
		},
		"outsider refused":           {login: "eve", orgs: []string{"uni"}, wantErr: auth.ErrNotAllowed},
		"pending invitation refused": {login: "mallory", orgs: []string{"uni"}, wantErr: auth.ErrNotAllowed},
		"wrong team refused":         {login: "alice", teams: []string{"uni/staff"}, wantErr: auth.ErrNotAllowed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g, err := auth.NewGitHub(auth.GitHubConfig{
				ClientID: gh.ClientID, ClientSecret: gh.ClientSecret, RedirectURL: githubCallback,
				URL: gh.URL, Orgs: tc.orgs, Teams: tc.teams, Identity: tc.identity,
			})
			if err != nil {
				t.Fatal(err)
			}
			flow, target := g.Start("/somewhere")
			state, code := authorizeAt(t, target, tc.login, "pw")
			got, err := g.Finish(context.Background(), flow, state, code)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGitHubRefusesTamperedFlows(t *testing.T) {
	gh := testenv.StartGitHub(githubCallback, []testenv.GitHubUser{{Login: "alice", Password: "pw", Verified: true}})
	t.Cleanup(gh.Close)
	g, err := auth.NewGitHub(auth.GitHubConfig{ClientID: gh.ClientID, ClientSecret: gh.ClientSecret, RedirectURL: githubCallback, URL: gh.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("forged state", func(t *testing.T) {
		flow, target := g.Start("/")
		_, code := authorizeAt(t, target, "alice", "pw")
		if _, err := g.Finish(ctx, flow, "forged", code); !errors.Is(err, auth.ErrStateMismatch) {
			t.Errorf("got %v, want ErrStateMismatch", err)
		}
	})
	t.Run("code from another flow (PKCE)", func(t *testing.T) {
		_, target := g.Start("/")
		other, _ := g.Start("/")
		state, code := authorizeAt(t, target, "alice", "pw")
		other.State = state // an attacker can learn the state, never the verifier
		if _, err := g.Finish(ctx, other, state, code); err == nil {
			t.Error("a code was redeemed without its PKCE verifier")
		}
	})
	t.Run("code replayed", func(t *testing.T) {
		flow, target := g.Start("/")
		state, code := authorizeAt(t, target, "alice", "pw")
		if _, err := g.Finish(ctx, flow, state, code); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Finish(ctx, flow, state, code); err == nil {
			t.Error("a code was redeemed twice")
		}
	})
	t.Run("bad configuration", func(t *testing.T) {
		if _, err := auth.NewGitHub(auth.GitHubConfig{ClientID: "x", ClientSecret: "y", Teams: []string{"no-slash"}}); err == nil {
			t.Error("a team without org/slug was accepted")
		}
		if _, err := auth.NewGitHub(auth.GitHubConfig{ClientID: "x"}); err == nil {
			t.Error("a missing client secret was accepted")
		}
	})
}

func TestGitHubIdentityMustBeKnown(t *testing.T) {
	_, err := auth.NewGitHub(auth.GitHubConfig{ClientID: "c", ClientSecret: "s", Identity: "email"})
	if err == nil || !strings.Contains(err.Error(), "id or login") {
		t.Errorf("identity email: %v, want an error naming id and login", err)
	}
}
