package gateway

import (
	"context"
	"errors"

	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// identity returns who is asking, or writes the response that makes them
// sign in.
func (s *Server) identity(w http.ResponseWriter, r *http.Request) (session.Identity, bool) {
	id, err := s.authenticator().Identify(r, nil)
	switch {
	case err == nil:
		return id, true
	case errors.Is(err, errUntrusted):
		s.Metrics.signinFailed("untrusted_header")
		pages.Error(w, r, http.StatusUnauthorized, "not authenticated")
	case isNavigation(r):
		http.Redirect(w, r, "/login?rd="+url.QueryEscape(r.URL.RequestURI()), http.StatusFound)
	default:
		pages.Error(w, r, http.StatusUnauthorized, "not signed in")
	}
	return session.Identity{}, false
}

// login shows and handles the static-users form.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.Static == nil {
		pages.NotFound(w, r)
		return
	}
	if r.Method == http.MethodPost {
		// The form is read, within its limits, before anything else:
		// a body too large, too slow or not a plain form costs no bcrypt.
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
			s.Metrics.signinFailed("bad_form")
			pages.Error(w, r, http.StatusUnsupportedMediaType, "sign-in expects a URL-encoded form")
			return
		}
		if err := r.ParseForm(); err != nil {
			s.Metrics.signinFailed("bad_form")
			formError(w, r, err)
			return
		}
	}
	rd := auth.SafeReturnPath(r.FormValue("rd"))
	render := func(code int, msg string) {
		pages.RenderLogin(w, code, pages.Login{Return: rd, Error: msg})
	}
	switch r.Method {
	case http.MethodGet:
		render(http.StatusOK, "")
	case http.MethodPost:
		// Login CSRF: a form posted from another site is refused.
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
			s.Metrics.signinFailed("cross_site")
			pages.Error(w, r, http.StatusForbidden, "cross-site sign-in refused")
			return
		}
		// Throttled before the password check: a flood against one
		// account, or from one client, costs no bcrypt and leaves the
		// check's gate to everyone else.
		user := r.PostFormValue("username")
		refund, d := s.throttled(r, user)
		if refund == nil {
			s.Metrics.signinFailed("throttled")
			w.Header().Set("Retry-After", retryAfter(d))
			render(http.StatusTooManyRequests, "Too many sign-in attempts; try again in "+retryAfter(d)+" seconds.")
			return
		}
		wait := s.Limits.PasswordCheckWait
		if wait == 0 {
			wait = formReadTimeout
		}
		leave := s.passwordChecks.enter(r.Context(), s.Limits.PasswordChecks, wait)
		if leave == nil {
			refund() // not an attempt: nothing was checked
			s.Metrics.signinFailed("busy")
			w.Header().Set("Retry-After", "5")
			render(http.StatusTooManyRequests, "Too many people are signing in at once; try again in a few seconds.")
			return
		}
		id, err := s.Static.Authenticate(user, r.PostFormValue("password"))
		leave()
		if err != nil {
			_, client := s.signin.get()
			client.spend(clientAddr(r, s.ForwardedBy), s.now())
			s.Metrics.signinFailed("bad_credentials")
			render(http.StatusUnauthorized, "Wrong user name or password.")
			return
		}
		// Signing in costs the account nothing: only failures count.
		refund()
		if err := s.Sessions.Save(w, id); err != nil {
			pages.Error(w, r, http.StatusInternalServerError, "could not sign in")
			return
		}
		s.provision(r.Context(), id)
		http.Redirect(w, r, rd, http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		pages.Error(w, r, http.StatusMethodNotAllowed, "method not allowed")
	}
}

// logout signs the user out on a POST carrying the session's form token.
// A GET only shows the button: were a GET enough, any site could sign its
// visitors out with a link or an image.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		pages.RenderLogout(w, http.StatusOK, pages.Logout{CSRF: s.Sessions.CSRFToken(r)})
	case http.MethodPost:
		if err := http.NewCrossOriginProtection().Check(r); err != nil {
			pages.Error(w, r, http.StatusForbidden, "cross-site sign-out refused")
			return
		}
		// Without a valid session there is nothing to protect: the
		// cookies are cleared whatever the token.
		if _, err := s.Sessions.Load(r); err == nil && !s.Sessions.CheckCSRF(r, r.PostFormValue("csrf")) {
			pages.Error(w, r, http.StatusForbidden, "this sign-out form has expired; reload the page and sign out again")
			return
		}
		s.Sessions.Clear(w)
		http.Redirect(w, r, "/", http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		pages.Error(w, r, http.StatusMethodNotAllowed, "method not allowed")
	}
}

// throttled takes one of the account's attempts and returns what gives it
// back, unless the account or the client has none left; then it says how
// long until one is free. The client's bucket is only looked at here:
// its failures spend it.
func (s *Server) throttled(r *http.Request, user string) (func(), time.Duration) {
	account, client := s.signin.get()
	now := s.now()
	if d := client.wait(clientAddr(r, s.ForwardedBy), now); d > 0 {
		return nil, d
	}
	return account.take(accountKey(user), now)
}

func sameOrigin(origin string, r *http.Request) bool {
	o := strings.TrimPrefix(strings.TrimPrefix(origin, "https://"), "http://")
	return o == r.Host
}

// startRemote sends the browser to the identity provider.
func (s *Server) startRemote(w http.ResponseWriter, r *http.Request) {
	flow, target := s.Provider.Start(auth.SafeReturnPath(r.FormValue("rd")))
	if err := s.Sessions.SaveFlow(w, flow); err != nil {
		pages.Error(w, r, http.StatusInternalServerError, "could not start sign-in")
		return
	}
	http.Redirect(w, r, target, http.StatusFound)
}

// finishRemote completes the code flow the provider redirected back with.
func (s *Server) finishRemote(w http.ResponseWriter, r *http.Request) {
	flow, err := s.Sessions.TakeFlow(w, r)
	if err != nil {
		s.Metrics.signinFailed("expired")
		pages.Error(w, r, http.StatusBadRequest, "the sign-in expired or was started elsewhere; please sign in again")
		return
	}
	if e := r.FormValue("error"); e != "" {
		s.Metrics.signinFailed("provider_error")
		pages.Error(w, r, http.StatusUnauthorized, "the identity provider refused the sign-in: "+e)
		return
	}
	id, err := s.Provider.Finish(r.Context(), flow, r.FormValue("state"), r.FormValue("code"))
	switch {
	case errors.Is(err, auth.ErrStateMismatch):
		s.Metrics.signinFailed("state_mismatch")
		pages.Error(w, r, http.StatusBadRequest, err.Error())
		return
	case errors.Is(err, auth.ErrNotAllowed):
		s.Metrics.signinFailed("not_allowed")
		pages.Error(w, r, http.StatusForbidden, err.Error())
		return
	case err != nil:
		s.Metrics.signinFailed("exchange")
		ctrl.LoggerFrom(r.Context()).Error(err, "completing sign-in")
		pages.Error(w, r, http.StatusBadGateway, "sign-in failed; please try again")
		return
	}
	if err := s.Sessions.Save(w, id); err != nil {
		pages.Error(w, r, http.StatusInternalServerError, "could not sign in")
		return
	}
	s.provision(r.Context(), id)
	http.Redirect(w, r, flow.Return, http.StatusSeeOther)
}

// provision creates the user's Userlands; a failure is logged, not shown:
// sign-in itself succeeded, and an admin can create the Userland by hand.
func (s *Server) provision(ctx context.Context, id session.Identity) {
	if s.Provisioner == nil {
		return
	}
	if _, err := s.Provisioner.Provision(ctx, id); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "auto-provisioning")
	}
}
