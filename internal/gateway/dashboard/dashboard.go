// Package dashboard is the gateway's web UI at "/": users see, start, stop
// and open their environments and create new ones from templates they may
// self-provision; admins and instructors see every environment they may
// reach, act on them and import rosters. Pages are server-rendered with
// html/template; a small script refreshes progress. Reads come from the
// informer cache; only actions write.
package dashboard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/gateway/authz"
	"github.com/userland-dev/userland/internal/gateway/provision"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// Paths the dashboard serves besides "/".
const (
	// ActionPath takes POSTed actions: start, stop, restart, apply, create.
	ActionPath = "/dashboard/action"
	// StatusPath answers the progress script with JSON.
	StatusPath = "/dashboard/status"
	// AdminPath is the admin and instructor view.
	AdminPath = "/dashboard/admin"
	// ImportPath takes a roster CSV upload.
	ImportPath = "/dashboard/import"
	// StaticPath serves the stylesheet and script.
	StaticPath = "/static/"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"ago": ago,
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
	// Policy decides who sees and acts on what.
	Policy authz.Policy
	// Provisioner offers and creates self-provisioned environments.
	Provisioner *provision.Provisioner
	// CSRF issues and checks form tokens.
	CSRF *session.Store
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Static serves the stylesheet and script.
func Static() http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	return http.StripPrefix(StaticPath, http.FileServerFS(sub))
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
		http.Error(w, "cross-site request refused", http.StatusForbidden)
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
	default:
		http.NotFound(w, r)
	}
}

func (d *Dashboard) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Row is one environment as the pages show it.
type Row struct {
	Namespace, Name, User, Template string
	Phase                           string
	Message                         string
	URL                             string
	LastActivity                    *time.Time
	UpdatePending                   bool
	Running                         bool
	Access                          authz.Reason
}

func rowOf(ul *v1alpha1.Userland, access authz.Reason) Row {
	row := Row{
		Namespace: ul.Namespace, Name: ul.Name, User: ul.Spec.User, Template: ul.Spec.TemplateRef.Name,
		Phase: string(ul.Status.Phase), URL: ul.Status.URL, UpdatePending: ul.Status.UpdatePending, Access: access,
	}
	if row.Phase == "" {
		row.Phase = string(v1alpha1.PhasePending)
	}
	if ul.Status.LastActivityTime != nil {
		t := ul.Status.LastActivityTime.Time
		row.LastActivity = &t
	}
	if c := meta.FindStatusCondition(ul.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		row.Message = c.Message
	}
	if ul.Status.Phase == v1alpha1.PhaseStopped {
		row.Message = "stopped"
		if ul.Status.StoppedReason == v1alpha1.StoppedIdle {
			row.Message = "stopped after being idle; opening it starts it again"
		}
	}
	row.Running = !ul.Spec.Suspend && ul.Status.Phase != v1alpha1.PhaseStopped
	return row
}

// visible lists the environments id may reach, keeping those keep admits.
func (d *Dashboard) visible(ctx context.Context, id session.Identity, keep func(authz.Reason, *v1alpha1.Userland) bool) ([]Row, error) {
	var list v1alpha1.UserlandList
	if err := d.Reader.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing userlands: %w", err)
	}
	annotations := map[string]map[string]string{}
	var rows []Row
	for i := range list.Items {
		ul := &list.Items[i]
		ann, ok := annotations[ul.Namespace]
		if !ok {
			var ns corev1.Namespace
			if err := d.Reader.Get(ctx, types.NamespacedName{Name: ul.Namespace}, &ns); err == nil {
				ann = ns.Annotations
			}
			annotations[ul.Namespace] = ann
		}
		if access := d.Policy.Allowed(id, ul, ann); access != "" && keep(access, ul) {
			rows = append(rows, rowOf(ul, access))
		}
	}
	slices.SortFunc(rows, func(a, b Row) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return rows, nil
}

// manages reports whether id administers anything: admins, and
// instructors of at least one namespace.
func (d *Dashboard) manages(ctx context.Context, id session.Identity) bool {
	if d.Policy.IsAdmin(id) {
		return true
	}
	return len(d.instructedNamespaces(ctx, id)) > 0
}

// instructedNamespaces are the namespaces whose instructor groups id is in.
func (d *Dashboard) instructedNamespaces(ctx context.Context, id session.Identity) []string {
	var list corev1.NamespaceList
	if err := d.Reader.List(ctx, &list); err != nil {
		return nil
	}
	var out []string
	probe := &v1alpha1.Userland{}
	for _, ns := range list.Items {
		if d.Policy.Allowed(id, probe, ns.Annotations) == authz.Instructor {
			out = append(out, ns.Name)
		}
	}
	return out
}

// namespaceManager reports whether id may create Userlands for others in
// a namespace. The instructed namespaces are read once, not per roster row.
func (d *Dashboard) namespaceManager(ctx context.Context, id session.Identity) func(ns string) bool {
	if d.Policy.IsAdmin(id) {
		return func(string) bool { return true }
	}
	instructed := d.instructedNamespaces(ctx, id)
	return func(ns string) bool { return slices.Contains(instructed, ns) }
}

// Page is what every page's header needs.
type Page struct {
	Title   string
	User    session.Identity
	CSRF    string
	Manages bool
	Flash   string
	Error   string
}

func (d *Dashboard) pageFor(ctx context.Context, r *http.Request, id session.Identity, title string) Page {
	return Page{
		Title: title, User: id, CSRF: d.CSRF.CSRFToken(r), Manages: d.manages(ctx, id),
		Flash: r.URL.Query().Get("flash"), Error: r.URL.Query().Get("error"),
	}
}

func render(w http.ResponseWriter, code int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'")
	w.WriteHeader(code)
	if err := pages.ExecuteTemplate(w, name, data); err != nil {
		// Headers are gone; the page ends with a notice, and the log says why.
		ctrl.Log.WithName("dashboard").Error(err, "rendering", "page", name)
		_, _ = fmt.Fprintf(w, "<p>rendering failed</p>")
	}
}

// home lists the user's own environments and what they may create.
func (d *Dashboard) home(w http.ResponseWriter, r *http.Request, id session.Identity) {
	ctx := r.Context()
	rows, err := d.visible(ctx, id, func(a authz.Reason, _ *v1alpha1.Userland) bool { return a == authz.Owner })
	if err != nil {
		http.Error(w, "could not list environments", http.StatusInternalServerError)
		return
	}
	var offers []provision.Candidate
	if d.Provisioner != nil {
		candidates, err := d.Provisioner.Candidates(ctx, id)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing templates to offer")
		}
		for _, c := range candidates {
			if !slices.ContainsFunc(rows, func(r Row) bool { return r.Namespace == c.Namespace && r.Name == c.Name }) {
				offers = append(offers, c)
			}
		}
	}
	render(w, http.StatusOK, "home.html", struct {
		Page
		Rows   []Row
		Offers []provision.Candidate
		Now    time.Time
	}{d.pageFor(ctx, r, id, "Your environments"), rows, offers, d.now()})
}

// Filter narrows the admin view.
type Filter struct {
	Namespace, Template, Phase string
	// IdleMinutes keeps environments idle for more than this many minutes.
	IdleMinutes int
}

func (f Filter) keep(ul *v1alpha1.Userland, now time.Time) bool {
	switch {
	case f.Namespace != "" && ul.Namespace != f.Namespace:
		return false
	case f.Template != "" && ul.Spec.TemplateRef.Name != f.Template:
		return false
	case f.Phase != "" && string(ul.Status.Phase) != f.Phase:
		return false
	case f.IdleMinutes > 0:
		last := ul.CreationTimestamp.Time
		if ul.Status.LastActivityTime != nil {
			last = ul.Status.LastActivityTime.Time
		}
		return now.Sub(last) > time.Duration(f.IdleMinutes)*time.Minute
	}
	return true
}

// admin lists every environment id may reach as admin or instructor.
func (d *Dashboard) admin(w http.ResponseWriter, r *http.Request, id session.Identity) {
	ctx := r.Context()
	if !d.manages(ctx, id) {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	f := Filter{Namespace: q.Get("namespace"), Template: q.Get("template"), Phase: q.Get("phase")}
	f.IdleMinutes, _ = strconv.Atoi(q.Get("idle"))
	now := d.now()
	var all []Row
	rows, err := d.visible(ctx, id, func(_ authz.Reason, ul *v1alpha1.Userland) bool {
		all = append(all, rowOf(ul, ""))
		return f.keep(ul, now)
	})
	if err != nil {
		http.Error(w, "could not list environments", http.StatusInternalServerError)
		return
	}
	// The filter choices come from what the user may see, not the cluster.
	var namespaces, templates []string
	for _, row := range all {
		if !slices.Contains(namespaces, row.Namespace) {
			namespaces = append(namespaces, row.Namespace)
		}
		if !slices.Contains(templates, row.Template) {
			templates = append(templates, row.Template)
		}
	}
	slices.Sort(namespaces)
	slices.Sort(templates)
	render(w, http.StatusOK, "admin.html", struct {
		Page
		Rows                  []Row
		Filter                Filter
		Namespaces, Templates []string
		Phases                []string
		Now                   time.Time
	}{d.pageFor(ctx, r, id, "All environments"), rows, f, namespaces, templates,
		[]string{"Pending", "Starting", "Ready", "Stopped", "Failed"}, now})
}

// StatusEntry is one environment in the progress script's JSON.
type StatusEntry struct {
	Namespace     string `json:"namespace"`
	Name          string `json:"name"`
	Phase         string `json:"phase"`
	Message       string `json:"message"`
	Event         string `json:"event,omitempty"`
	URL           string `json:"url"`
	LastActivity  string `json:"lastActivity"`
	UpdatePending bool   `json:"updatePending"`
	Running       bool   `json:"running"`
}

// latestEvent returns the newest event about an environment in plain
// words, e.g. "Stopped: environment scaled to zero (Suspended)".
func (d *Dashboard) latestEvent(ctx context.Context, ns, name string) string {
	if d.Events == nil {
		return ""
	}
	var events corev1.EventList
	if err := d.Events.List(ctx, &events, client.InNamespace(ns),
		client.MatchingFields{"involvedObject.kind": "Userland", "involvedObject.name": name}); err != nil {
		return ""
	}
	var latest *corev1.Event
	for i := range events.Items {
		e := &events.Items[i]
		if latest == nil || eventTime(e).After(eventTime(latest)) {
			latest = e
		}
	}
	if latest == nil {
		return ""
	}
	return latest.Reason + ": " + latest.Message
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func ago(now time.Time, t *time.Time) string {
	if t == nil {
		return "never"
	}
	d := now.Sub(*t).Round(time.Second)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return t.Format("2006-01-02")
}

// status answers the progress script: the user's own environments, or
// with ?all=1 everything they manage, with the latest event for those
// starting or failing.
func (d *Dashboard) status(w http.ResponseWriter, r *http.Request, id session.Identity) {
	ctx := r.Context()
	all := r.URL.Query().Get("all") == "1"
	rows, err := d.visible(ctx, id, func(a authz.Reason, _ *v1alpha1.Userland) bool { return all || a == authz.Owner })
	if err != nil {
		http.Error(w, "could not list environments", http.StatusInternalServerError)
		return
	}
	now := d.now()
	out := make([]StatusEntry, 0, len(rows))
	for _, row := range rows {
		e := StatusEntry{
			Namespace: row.Namespace, Name: row.Name, Phase: row.Phase, Message: row.Message, URL: row.URL,
			LastActivity: ago(now, row.LastActivity), UpdatePending: row.UpdatePending, Running: row.Running,
		}
		if !all && (row.Phase == string(v1alpha1.PhaseStarting) || row.Phase == string(v1alpha1.PhaseFailed) || row.Phase == string(v1alpha1.PhasePending)) {
			e.Event = d.latestEvent(ctx, row.Namespace, row.Name)
		}
		out = append(out, e)
	}
	writeJSON(w, out)
}

// errForbidden is an action the user may not take; it looks like a missing
// environment.
var errForbidden = errors.New("no such environment")

// action performs a POSTed action and redirects back.
func (d *Dashboard) action(w http.ResponseWriter, r *http.Request, id session.Identity) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !d.CSRF.CheckCSRF(r, r.PostFormValue("csrf")) {
		http.Error(w, "the form expired; reload the page and try again", http.StatusForbidden)
		return
	}
	ctx := r.Context()
	back := auth.SafeReturnPath(r.PostFormValue("rd"))
	key := types.NamespacedName{Namespace: r.PostFormValue("namespace"), Name: r.PostFormValue("name")}
	verb := r.PostFormValue("action")
	var err error
	var flash string
	switch verb {
	case "create":
		flash, err = d.create(ctx, id, key, r.PostFormValue("kind"), r.PostFormValue("template"))
	case "start", "stop", "restart", "apply":
		flash, err = d.act(ctx, id, key, verb)
	default:
		err = fmt.Errorf("unknown action %q", verb)
	}
	sep := "?"
	if strings.Contains(back, "?") {
		sep = "&"
	}
	if err != nil {
		if !errors.Is(err, errForbidden) {
			ctrl.LoggerFrom(ctx).Error(err, "dashboard action", "action", verb, "userland", key)
		}
		http.Redirect(w, r, back+sep+"error="+urlQueryEscape(plainError(err)), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, back+sep+"flash="+urlQueryEscape(flash), http.StatusSeeOther)
}

// act changes one environment the user may reach.
func (d *Dashboard) act(ctx context.Context, id session.Identity, key types.NamespacedName, verb string) (string, error) {
	ul, access := d.Policy.Check(ctx, d.Reader, id, key)
	if ul == nil {
		return "", errForbidden
	}
	verbName, err := actions.Parse(verb)
	if err != nil {
		return "", err
	}
	actor := actions.Staff
	if access == authz.Owner {
		actor = actions.Owner
	}
	patch, err := actions.Patch(verbName, actor, ul, d.now())
	if err != nil {
		return "", err
	}
	target := &v1alpha1.Userland{}
	target.Namespace, target.Name = key.Namespace, key.Name
	if err := d.Writer.Patch(ctx, target, patch, client.FieldOwner("userland-dashboard")); err != nil {
		return "", fmt.Errorf("%s %s: %w", verb, key, err)
	}
	done := map[string]string{"start": "starting", "stop": "stopping", "restart": "restarting", "apply": "applying the update to"}[verb]
	return fmt.Sprintf("%s %s.", capitalise(done), key.Name), nil
}

// create provisions one of the user's own environments from a template
// they may self-provision.
func (d *Dashboard) create(ctx context.Context, id session.Identity, key types.NamespacedName, kind, tmpl string) (string, error) {
	if d.Provisioner == nil {
		return "", errForbidden
	}
	candidates, err := d.Provisioner.Candidates(ctx, id)
	if err != nil {
		return "", err
	}
	for _, c := range candidates {
		if c.Namespace == key.Namespace && c.Ref.Name == tmpl && string(c.Ref.Kind) == kind {
			if _, err := d.Provisioner.Create(ctx, id, c); err != nil {
				return "", err
			}
			return fmt.Sprintf("Created %s.", c.Name), nil
		}
	}
	return "", errForbidden
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// plainError says what went wrong without internals.
func plainError(err error) string {
	if errors.Is(err, errForbidden) {
		return "That environment does not exist or is not yours."
	}
	if errors.Is(err, actions.ErrSuspendedByStaff) {
		return "An administrator or instructor suspended this environment, so only they can start it again."
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && len(msg)-i < 200 {
		msg = msg[i+2:]
	}
	return "The action failed: " + msg
}
