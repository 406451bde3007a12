package testenv

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// GitHubUser is an account of the GitHub stand-in.
type GitHubUser struct {
	Login, Password string
	// ID is the account's numeric ID, which stays with it through
	// renames while the login is freed for anyone; 0: 1000 plus the
	// account's place in the list given to StartGitHub.
	ID int64
	// Email is the primary address; Verified says whether GitHub checked it.
	Email    string
	Verified bool
	// Orgs and Teams ("org/slug") the user actively belongs to; Pending
	// lists orgs they were only invited to.
	Orgs, Teams, Pending []string
}

// GitHub is a stand-in for github.com's OAuth web flow and the REST
// endpoints the gateway reads, because the real service is out of reach
// here. It enforces what GitHub enforces for an OAuth app: the registered
// client and redirect URL, single-use codes, PKCE (S256) and bearer tokens.
type GitHub struct {
	// URL is the web address; the API is served under URL + "/api/v3/".
	URL                    string
	ClientID, ClientSecret string

	server   *httptest.Server
	redirect string
	users    map[string]GitHubUser

	mu     sync.Mutex
	codes  map[string]grant
	tokens map[string]string // token -> login
}

type grant struct{ login, challenge, redirect string }

var githubLoginForm = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><title>Sign in to GitHub (stand-in)</title></head><body>
<form method="post"><input type="hidden" name="q" value="{{.}}">
<input name="login"><input name="password" type="password"><button>Sign in</button></form>
</body></html>`))

// StartGitHub serves the stand-in; redirectURL is the only callback it
// accepts. Stop it with Close.
func StartGitHub(redirectURL string, users []GitHubUser) *GitHub {
	g := &GitHub{
		ClientID: "userland-test", ClientSecret: random(), redirect: redirectURL,
		users: map[string]GitHubUser{}, codes: map[string]grant{}, tokens: map[string]string{},
	}
	for i, u := range users {
		if u.ID == 0 {
			u.ID = 1000 + int64(i)
		}
		g.users[u.Login] = u
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/login/oauth/authorize", g.authorize)
	mux.HandleFunc("POST /login/oauth/access_token", g.token)
	mux.HandleFunc("GET /api/v3/user", g.api(func(u GitHubUser, _ *http.Request) any { return map[string]any{"login": u.Login, "id": u.ID} }))
	mux.HandleFunc("GET /api/v3/user/emails", g.api(func(u GitHubUser, _ *http.Request) any {
		return []map[string]any{{"email": u.Email, "primary": true, "verified": u.Verified}, {"email": u.Login + "@users.noreply.example", "primary": false, "verified": true}}
	}))
	mux.HandleFunc("GET /api/v3/user/memberships/orgs/{org}", g.api(func(u GitHubUser, r *http.Request) any {
		switch org := r.PathValue("org"); {
		case slices.Contains(u.Orgs, org):
			return map[string]string{"state": "active"}
		case slices.Contains(u.Pending, org):
			return map[string]string{"state": "pending"}
		}
		return nil
	}))
	mux.HandleFunc("GET /api/v3/orgs/{org}/teams/{slug}/memberships/{user}", g.api(func(u GitHubUser, r *http.Request) any {
		member, ok := g.users[r.PathValue("user")]
		if ok && slices.Contains(member.Teams, r.PathValue("org")+"/"+r.PathValue("slug")) {
			return map[string]string{"state": "active"}
		}
		return nil
	}))
	g.server = httptest.NewServer(mux)
	g.URL = g.server.URL
	return g
}

// Close stops the stand-in.
func (g *GitHub) Close() { g.server.Close() }

func random() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// authorize shows a login form, then redirects back with a code.
func (g *GitHub) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		q, _ = url.ParseQuery(r.PostFormValue("q"))
	}
	switch {
	case q.Get("client_id") != g.ClientID:
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	case q.Get("redirect_uri") != g.redirect:
		http.Error(w, "redirect_uri is not the registered callback", http.StatusBadRequest)
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "PKCE S256 required", http.StatusBadRequest)
		return
	}
	if r.Method != http.MethodPost {
		_ = githubLoginForm.Execute(w, q.Encode())
		return
	}
	u, ok := g.users[r.PostFormValue("login")]
	if !ok || u.Password != r.PostFormValue("password") {
		w.WriteHeader(http.StatusUnauthorized)
		_ = githubLoginForm.Execute(w, q.Encode())
		return
	}
	code := random()
	g.mu.Lock()
	g.codes[code] = grant{login: u.Login, challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri")}
	g.mu.Unlock()
	back, _ := url.Parse(g.redirect)
	back.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}}.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// token exchanges a code, once, for a bearer token.
func (g *GitHub) token(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	code := r.PostFormValue("code")
	gr, ok := g.codes[code]
	delete(g.codes, code)
	sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.PostFormValue("client_id") != g.ClientID || r.PostFormValue("client_secret") != g.ClientSecret:
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "incorrect_client_credentials"})
	case !ok || r.PostFormValue("redirect_uri") != gr.redirect:
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "bad_verification_code"})
	case base64.RawURLEncoding.EncodeToString(sum[:]) != gr.challenge:
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "bad_verification_code", "error_description": "PKCE verification failed"})
	default:
		token := random()
		g.tokens[token] = gr.login
		_ = json.NewEncoder(w).Encode(map[string]string{"access_token": token, "token_type": "bearer", "scope": "read:user,user:email,read:org"})
	}
}

// api serves an authenticated REST endpoint; a nil answer is a 404.
func (g *GitHub) api(answer func(GitHubUser, *http.Request) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		login, ok := g.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"message":"Bad credentials"}`))
			return
		}
		body := answer(g.users[login], r)
		if body == nil {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"Not Found"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(body)
	}
}
