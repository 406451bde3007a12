// Package dashboard is the gateway's web UI at "/": users see, start, stop
// and open their environments and create new ones from templates they may
// self-provision; admins and instructors see every environment they may
// reach, act on them and import rosters. Pages are server-rendered with
// html/template; a small script refreshes progress. Reads come from the
// informer cache; only actions write.
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/internal/access"
	"github.com/userland-dev/userland/internal/gateway/authz"
	gwpages "github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/provision"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// Paths the dashboard serves besides "/".
const (
	// ActionPath takes POSTed actions: start, stop, restart, apply,
	// create and keep-running.
	ActionPath = "/dashboard/action"
	// StatusPath answers the progress script with JSON.
	StatusPath = "/dashboard/status"
	// AdminPath is the admin and instructor view.
	AdminPath = "/dashboard/admin"
	// ImportPath takes a roster CSV upload.
	ImportPath = "/dashboard/import"
	// CoursePath is a course's page for its staff; POSTs to it act on the
	// whole course (start all, stop all, import a roster).
	CoursePath = "/dashboard/course"
	// StaticPath serves the stylesheet and script.
	StaticPath = "/static/"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"ago":   ago,
	"until": until,
	// dict passes several values to a shared template.
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
}).ParseFS(templateFS, "templates/*.html"))

// Dashboard serves the UI.
type Dashboard struct {
	// Reader reads Userlands, templates and namespaces (the cache).
	Reader client.Reader
	// Writer performs actions with the gateway's own credentials, after
	// the dashboard has checked the user may act (authz.Policy).
	Writer client.Client
	// Events reads an environment's latest events straight from the API
	// server, only while someone watches it start.
	Events client.Reader
	// Live reads past the cache: a course's roster just before a merge
	// into it.
	Live client.Reader
	// Policy decides who sees and acts on what.
	Policy authz.Policy
	// Access asks the API server (SubjectAccessReview) whether a person
	// may change a course, with the person's names as RBACNames maps them.
	Access    access.Reviewer
	RBACNames access.Mapping
	// Provisioner offers and creates self-provisioned environments.
	Provisioner *provision.Provisioner
	// CSRF issues and checks form tokens.
	CSRF *session.Store
	// KeepRunning records that a user answered an idle warning (the
	// gateway's activity recorder); nil hides the button.
	KeepRunning func(ctx context.Context, key types.NamespacedName, uid types.UID) error
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	// events caches each environment's latest event for the status poll.
	events eventCache
}

// Static serves the stylesheet (shared with the gateway's other pages)
// and the script.
func Static() http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix(StaticPath, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == StaticPath+"dashboard.css" {
			w.Header().Set("Content-Type", "text/css; charset=utf-8")
			http.ServeContent(w, r, "dashboard.css", time.Time{}, bytes.NewReader(gwpages.CSS))
			return
		}
		files.ServeHTTP(w, r)
	})
}

// Owns reports whether path belongs to the dashboard.
func Owns(path string) bool {
	return path == "/" || strings.HasPrefix(path, "/dashboard/")
}

// ServeHTTP routes a signed-in user's request.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request, id session.Identity) {
	// Browsers send Sec-Fetch-Site/Origin; a cross-site POST is refused
	// before the token is even looked at.
	if err := http.NewCrossOriginProtection().Check(r); err != nil {
		gwpages.Error(w, r, http.StatusForbidden, "cross-site request refused")
		return
	}
	switch r.URL.Path {
	case "/":
		d.home(w, r, id)
	case StatusPath:
		d.status(w, r, id)
	case AdminPath:
		d.admin(w, r, id)
	case ActionPath:
		d.action(w, r, id)
	case ImportPath:
		d.importRoster(w, r, id)
	case CoursePath:
		d.course(w, r, id)
	default:
		gwpages.NotFound(w, r)
	}
}

func (d *Dashboard) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}
