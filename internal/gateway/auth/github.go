package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v88/github"
	"golang.org/x/oauth2"

	"github.com/userland-dev/userland/internal/gateway/session"
)

// Provider is a sign-in at a remote identity provider through a browser
// redirect: OpenID Connect or GitHub.
type Provider interface {
	// Start returns the flow to keep in a cookie and the URL to send the
	// browser to.
	Start(returnTo string) (session.Flow, string)
	// Finish completes the sign-in from the callback's state and code.
	Finish(ctx context.Context, f session.Flow, state, code string) (session.Identity, error)
}

var (
	_ Provider = (*OIDC)(nil)
	_ Provider = (*GitHub)(nil)
)

// GitHubConfig configures GitHub OAuth sign-in.
type GitHubConfig struct {
	// ClientID and ClientSecret identify the gateway's OAuth app.
	ClientID, ClientSecret string
	// RedirectURL is the gateway's /oauth2/callback as the browser sees it.
	RedirectURL string
	// URL is GitHub's web address: https://github.com, or a GitHub
	// Enterprise Server's.
	URL string
	// APIURL is the REST API: https://api.github.com by default, or
	// <URL>/api/v3/ for GitHub Enterprise Server.
	APIURL string
	// Orgs and Teams ("org/team-slug"), when set, restrict sign-in to
	// active members of at least one. Each one the user belongs to becomes
	// one of their groups, so admin and instructor groups can name them.
	Orgs, Teams []string
	// HTTPClient reaches GitHub (http.DefaultClient when nil).
	HTTPClient *http.Client
	// Identity is what a signed-in user is (spec.user): GitHubByID
	// (the default) or GitHubByLogin.
	Identity string
}

// What a GitHub user is to Userland. A login is not an identity: GitHub
// frees it when its owner renames the account, and whoever registers it
// next would be given the owner's environments. The numeric user ID stays
// with the account. The login remains the name shown (Identity.Name).
const (
	// GitHubByID makes the user "github:<numeric ID>".
	GitHubByID = "id"
	// GitHubByLogin makes the user the login name, as before the ID was
	// used: kept only for Userlands not yet migrated (docs/github-identity.md).
	GitHubByLogin = "login"
)

// GitHubUserPrefix begins a GitHub user's numeric identity.
const GitHubUserPrefix = "github:"

// GitHub signs users in with a GitHub OAuth app; the numeric user ID (or,
// for unmigrated installations, the login) is the identity.
type GitHub struct {
	cfg   GitHubConfig
	oauth oauth2.Config
}

// NewGitHub checks the configuration; it makes no requests.
func NewGitHub(cfg GitHubConfig) (*GitHub, error) {
	if cfg.ClientID == "" || cfg.ClientSecret == "" {
		return nil, errors.New("GitHub sign-in needs a client ID and a client secret")
	}
	if cfg.URL == "" {
		cfg.URL = "https://github.com"
	}
	cfg.URL = strings.TrimSuffix(cfg.URL, "/")
	if cfg.APIURL == "" {
		cfg.APIURL = "https://api.github.com/"
		if cfg.URL != "https://github.com" {
			cfg.APIURL = cfg.URL + "/api/v3/"
		}
	}
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/"
	}
	for _, t := range cfg.Teams {
		if org, slug, ok := strings.Cut(t, "/"); !ok || org == "" || slug == "" {
			return nil, fmt.Errorf("GitHub team %q: want org/team-slug", t)
		}
	}
	switch cfg.Identity {
	case "":
		cfg.Identity = GitHubByID
	case GitHubByID, GitHubByLogin:
	default:
		return nil, fmt.Errorf("GitHub identity %q: want %s or %s", cfg.Identity, GitHubByID, GitHubByLogin)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	// read:user and user:email are enough for the login and verified
	// address; membership checks need read:org.
	scopes := []string{"read:user", "user:email"}
	if len(cfg.Orgs)+len(cfg.Teams) > 0 {
		scopes = append(scopes, "read:org")
	}
	return &GitHub{cfg: cfg, oauth: oauth2.Config{
		ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL, Scopes: scopes,
		Endpoint: oauth2.Endpoint{
			AuthURL:  cfg.URL + "/login/oauth/authorize",
			TokenURL: cfg.URL + "/login/oauth/access_token",
			// GitHub takes the client secret in the form body.
			AuthStyle: oauth2.AuthStyleInParams,
		},
	}}, nil
}

// Start begins a sign-in with state and PKCE.
func (g *GitHub) Start(returnTo string) (session.Flow, string) {
	f := session.Flow{State: randomString(), Verifier: oauth2.GenerateVerifier(), Return: returnTo}
	return f, g.oauth.AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier))
}

// Finish exchanges the code and reads the user, their verified primary
// e-mail and their memberships from the API.
func (g *GitHub) Finish(ctx context.Context, f session.Flow, state, code string) (session.Identity, error) {
	if state == "" || state != f.State {
		return session.Identity{}, ErrStateMismatch
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, g.cfg.HTTPClient)
	token, err := g.oauth.Exchange(ctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return session.Identity{}, fmt.Errorf("exchanging the code: %w", err)
	}
	api, err := github.NewClient(
		github.WithHTTPClient(g.oauth.Client(ctx, token)),
		github.WithURLs(&g.cfg.APIURL, &g.cfg.APIURL),
	)
	if err != nil {
		return session.Identity{}, fmt.Errorf("GitHub API client: %w", err)
	}
	user, _, err := api.Users.Get(ctx, "")
	if err != nil {
		return session.Identity{}, fmt.Errorf("reading the GitHub user: %w", err)
	}
	login := user.GetLogin()
	if login == "" || user.GetID() <= 0 {
		return session.Identity{}, errors.New("GitHub returned no login name or user ID")
	}
	id := session.Identity{User: login}
	if g.cfg.Identity == GitHubByID {
		id.User, id.Name = GitHubUserPrefix+strconv.FormatInt(user.GetID(), 10), login
	}
	emails, _, err := api.Users.ListEmails(ctx, nil)
	if err != nil {
		return session.Identity{}, fmt.Errorf("reading the GitHub user's e-mail addresses: %w", err)
	}
	for _, e := range emails {
		if e.GetPrimary() && e.GetVerified() {
			id.Email = e.GetEmail()
		}
	}
	if id.Groups, err = g.memberships(ctx, api, login); err != nil {
		return session.Identity{}, err
	}
	if len(g.cfg.Orgs)+len(g.cfg.Teams) > 0 && len(id.Groups) == 0 {
		return session.Identity{}, fmt.Errorf("%w: not a member of an allowed GitHub organisation or team", ErrNotAllowed)
	}
	return id, nil
}

// memberships returns the configured orgs and teams the user actively
// belongs to. Pending invitations do not count.
func (g *GitHub) memberships(ctx context.Context, api *github.Client, login string) ([]string, error) {
	var groups []string
	for _, org := range g.cfg.Orgs {
		m, _, err := api.Organizations.GetOrgMembership(ctx, "", org)
		if ok, err := activeMember(m, err); err != nil {
			return nil, fmt.Errorf("checking membership of GitHub organisation %s: %w", org, err)
		} else if ok {
			groups = append(groups, org)
		}
	}
	for _, team := range g.cfg.Teams {
		org, slug, _ := strings.Cut(team, "/")
		m, _, err := api.Teams.GetTeamMembershipBySlug(ctx, org, slug, login)
		if ok, err := activeMember(m, err); err != nil {
			return nil, fmt.Errorf("checking membership of GitHub team %s: %w", team, err)
		} else if ok && !slices.Contains(groups, team) {
			groups = append(groups, team)
		}
	}
	return groups, nil
}

// activeMember reads a membership answer: 404 and 403 (not a member, or
// the org restricts the app) mean no; other errors are errors.
func activeMember(m *github.Membership, err error) (bool, error) {
	var resp *github.ErrorResponse
	if errors.As(err, &resp) && resp.Response != nil &&
		(resp.Response.StatusCode == http.StatusNotFound || resp.Response.StatusCode == http.StatusForbidden) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return m.GetState() == "active", nil
}
