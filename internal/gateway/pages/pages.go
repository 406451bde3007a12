// Package pages renders the pages the gateway shows outside the dashboard:
// sign-in, an environment's progress, errors and "not found". They share
// the dashboard's stylesheet, which this package owns, and carry it inline
// so they look the same on the main host and on environment hosts, where
// a /static/ path would belong to the environment.
package pages

import (
	"crypto/sha256"
	_ "embed" // the stylesheet
	"encoding/base64"
	"html/template"
	"io"
	"net/http"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
)

// CSS is the stylesheet of every page, the dashboard's included.
//
//go:embed style.css
var CSS []byte

// styleHash admits the inline stylesheet, and nothing else, under the
// pages' Content-Security-Policy.
var styleHash = func() string {
	sum := sha256.Sum256(CSS)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}()

// csp lets a page show its inline stylesheet and post its form to its own
// origin; no script runs, nothing loads and nothing frames it.
var csp = "default-src 'none'; style-src " + styleHash + "; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

var layout = template.Must(template.New("layout").Funcs(template.FuncMap{
	"css": func() template.CSS { return template.CSS(CSS) }, //nolint:gosec // our own embedded stylesheet
}).Parse(`{{define "top"}}<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{with .Refresh}}<meta http-equiv="refresh" content="{{.}}">{{end}}
<title>{{.Title}} — Userland</title>
<style>{{css}}</style>
</head>
<body>
<header><nav aria-label="Main"><a class="brand" href="{{or .Home "/"}}">Userland</a>{{with .User}}<span class="who">Signed in as <strong>{{.}}</strong></span>{{end}}</nav></header>
<main id="main" class="narrow">
<h1>{{.Heading}}</h1>
{{end}}
{{define "bottom"}}</main>
</body>
</html>{{end}}
`))

var (
	loginPage = template.Must(template.Must(layout.Clone()).Parse(`{{template "top" .}}
{{with .Error}}<p class="error" role="alert">{{.}}</p>{{end}}
<form class="card stack" method="post" action="/login">
<input type="hidden" name="rd" value="{{.Return}}">
<label for="username">User</label>
<input id="username" name="username" autocomplete="username" autocapitalize="none" spellcheck="false" required autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button class="primary" type="submit">Sign in</button>
</form>
{{template "bottom" .}}`))

	progressPage = template.Must(template.Must(layout.Clone()).Parse(`{{template "top" .}}
<section class="card" aria-labelledby="phase-label">
<p id="phase-label" class="muted">{{.Environment}}{{with .Owner}} for {{.}}{{end}}</p>
<p role="{{if .Failed}}alert{{else}}status{{end}}" aria-live="polite"><span class="phase phase-{{.Phase}}">{{.Phase}}</span>{{with .Message}} — {{.}}{{end}}</p>
{{if .Failed}}<p>This page keeps checking, and continues if it recovers. Ask your instructor if it does not.</p>
{{else if not .Final}}<p class="muted">This page continues to your environment when it is ready.</p>{{end}}
</section>
{{template "bottom" .}}`))

	// logoutPage is what a GET of /logout shows: signing out is a POST
	// with the session's form token, so no other site can sign a user out
	// with a link or an image.
	logoutPage = template.Must(template.Must(layout.Clone()).Parse(`{{template "top" .}}
<form class="card stack" method="post" action="/logout">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<p>Sign out of Userland on this browser? Your environments keep running until they are idle.</p>
<button class="primary" type="submit">Sign out</button>
</form>
<p><a href="{{or .Home "/"}}">Your environments</a></p>
{{template "bottom" .}}`))

	messagePage = template.Must(template.Must(layout.Clone()).Parse(`{{template "top" .}}
<p class="card">{{.Message}}</p>
<p><a href="{{or .Home "/"}}">Your environments</a></p>
{{template "bottom" .}}`))
)

// Frame is what every page's header needs.
type Frame struct {
	// Title is the window title; Heading the page's h1.
	Title, Heading string
	// User is the signed-in user, if any.
	User string
	// Home is the dashboard's address (empty: "/", the main host).
	Home string
	// Refresh reloads the page after that many seconds (empty: never).
	Refresh string
}

// Login is the static users' sign-in form.
type Login struct {
	Frame
	// Return is where to go after signing in; Error why the last try
	// failed.
	Return, Error string
}

// Progress is an environment's progress page: starting, failed, or a
// final word such as "suspended".
type Progress struct {
	Frame
	// Environment is the template's display name; Owner the user.
	Environment, Owner string
	// Phase is Starting, Failed, …; Message the controller's plain words.
	Phase, Message string
	// Final: the page will not move on by itself. Failed: it cannot start.
	Final, Failed bool
}

// Logout is the sign-out page's form.
type Logout struct {
	Frame
	// CSRF is the session's form token.
	CSRF string
}

// Message is an error or "not found" page.
type Message struct {
	Frame
	Message string
}

// Headers mark a page the gateway renders: never cached, never framed,
// no script.
func Headers(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", csp)
}

// RenderLogin writes the sign-in page.
func RenderLogin(w http.ResponseWriter, code int, p Login) {
	p.Title, p.Heading = "Sign in", "Sign in to Userland"
	render(w, code, loginPage, p)
}

// RenderLogout writes the sign-out page.
func RenderLogout(w http.ResponseWriter, code int, p Logout) {
	p.Title, p.Heading = "Sign out", "Sign out"
	render(w, code, logoutPage, p)
}

// RenderProgress writes an environment's progress page.
func RenderProgress(w http.ResponseWriter, code int, p Progress) {
	switch {
	case p.Final:
		p.Title, p.Heading = p.Environment, p.Environment
	case p.Failed:
		p.Title, p.Heading = p.Environment+" cannot start", p.Environment+" cannot start"
	default:
		// A second: the gateway holds the reload until the environment
		// is Ready (up to a couple of seconds), so this only sets how
		// soon a state that came up meanwhile is shown.
		p.Title, p.Heading, p.Refresh = "Starting "+p.Environment, "Starting "+p.Environment+"…", "1"
	}
	render(w, code, progressPage, p)
}

// Error writes an error page for a browser, or the message as plain text
// for anything else (scripts, an app's own fetch), which reads it better.
func Error(w http.ResponseWriter, r *http.Request, code int, message string) {
	if !wantsHTML(r) {
		http.Error(w, message, code)
		return
	}
	heading := http.StatusText(code)
	if code == http.StatusNotFound {
		heading = "Not found"
	}
	render(w, code, messagePage, Message{Frame: Frame{Title: heading, Heading: heading}, Message: message})
}

// NotFound is the one "not found": the same for a page that does not
// exist and an environment that is someone else's, so neither reveals
// which.
func NotFound(w http.ResponseWriter, r *http.Request) {
	Error(w, r, http.StatusNotFound, "There is nothing here, or it is not yours to open. (404 page not found)")
}

// wantsHTML reports whether a browser navigated here.
func wantsHTML(r *http.Request) bool {
	if mode := r.Header.Get("Sec-Fetch-Mode"); mode != "" {
		return mode == "navigate"
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

func render(w http.ResponseWriter, code int, t *template.Template, data any) {
	var out strings.Builder
	if err := t.Execute(&out, data); err != nil {
		ctrl.Log.WithName("pages").Error(err, "rendering a page")
		http.Error(w, "rendering failed", http.StatusInternalServerError)
		return
	}
	Headers(w)
	w.WriteHeader(code)
	_, _ = io.WriteString(w, out.String())
}
