package dashboard

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/describe"
	"github.com/userland-dev/userland/internal/gateway/authz"
	gwpages "github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/provision"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// Row is one environment as the pages show it.
type Row struct {
	Namespace, Name, User, Template string
	// TemplateKind is Template or ClusterTemplate.
	TemplateKind v1alpha1.TemplateKind
	// Title is what people call it: the template's display name. The
	// generated object name is never shown.
	Title string
	// Label names it to assistive technology, unique on its page: the
	// title for its owner, "<user>'s <title>" for staff.
	Label string
	Phase string
	// State is the phase the list filters match: the status phase,
	// Pending before the controller's first (phaseOf). Phase may say more
	// (a stopped environment's reason).
	State              string
	Message            string
	URL                string
	LastActivity       *time.Time
	LastActivitySource v1alpha1.ActivitySource
	// IdleStopAt is set while an idle stop is near.
	IdleStopAt    *time.Time
	UpdatePending bool
	Running       bool
	Access        authz.Reason
	// QueuePosition is the place in its course's queue, 0 when not queued.
	QueuePosition int32
	// Budgeted is true when a compute-hour budget governs it; Usage says
	// its use in words, UsedSeconds and RemainingSeconds in numbers
	// (withUsage).
	Budgeted                      bool
	Usage                         string
	UsedSeconds, RemainingSeconds int64
	// CanGrant offers "Grant hours" on the admin page: an environment
	// outside a course whose budget RBAC lets the viewer grant
	// (grantableHere).
	CanGrant bool
	// Granted is the grant annotation as the page shows it: its grant
	// form sends it back, and a grant is added only while it is unchanged
	// (actions.GrantIfUnchanged).
	Granted string
	// UID tells the Userland from an earlier one of its name (their
	// events share the name). Not shown.
	UID types.UID `json:"-"`
}

func rowOf(ul *v1alpha1.Userland, access authz.Reason) Row {
	d := describe.Environment(ul)
	row := Row{
		Namespace: ul.Namespace, Name: ul.Name, User: ul.Spec.User, Template: ul.Spec.TemplateRef.Name,
		TemplateKind: ul.Spec.TemplateRef.Kind, Title: describe.Title(ul),
		Phase: d.Phase, State: phaseOf(ul), Message: d.Message, Running: d.Running, IdleStopAt: d.IdleStopAt,
		URL: ul.Status.URL, UpdatePending: ul.Status.UpdatePending, Access: access, QueuePosition: ul.Status.QueuePosition,
		UID: ul.UID,
	}
	row.Label = row.Title
	if access != authz.Owner {
		row.Label = ul.Spec.User + "'s " + row.Title
	}
	if ul.Status.LastActivityTime != nil {
		t := ul.Status.LastActivityTime.Time
		row.LastActivity = &t
		row.LastActivitySource = ul.Status.LastActivitySource
	}
	return row
}

// visible lists the environments id may reach, keeping those keep admits.
func (d *Dashboard) visible(ctx context.Context, id session.Identity, keep func(authz.Reason, *v1alpha1.Userland) bool) ([]Row, error) {
	var (
		kept   []*v1alpha1.Userland
		access []authz.Reason
		rows   []Row
	)
	now := d.now()
	err := d.reachable(ctx, id, func(reason authz.Reason, ul *v1alpha1.Userland) {
		if keep(reason, ul) {
			kept, access = append(kept, ul), append(access, reason)
		}
	})
	// Budget figures sum only what is listed: nothing the viewer cannot
	// reach moves a number they see.
	sharing := course.NewBudgetSharing(kept, d.courses(ctx))
	for i, ul := range kept {
		rows = append(rows, withUsage(rowOf(ul, access[i]), ul, sharing, now))
	}
	slices.SortFunc(rows, func(a, b Row) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return rows, err
}

// reachable calls each with every environment id may reach and why, by
// the one access rule (authz.Policy's batch). Every list the dashboard
// shows, counts or pages goes through it or the same batch. ul is the
// cache's own object: read it, never change it.
func (d *Dashboard) reachable(ctx context.Context, id session.Identity, each func(authz.Reason, *v1alpha1.Userland)) error {
	var list v1alpha1.UserlandList
	if err := d.Reader.List(ctx, &list); err != nil {
		return fmt.Errorf("listing userlands: %w", err)
	}
	decide := d.Policy.NewBatch(d.Reader, id)
	for i := range list.Items {
		ul := &list.Items[i]
		if access := decide.Reason(ctx, ul); access != "" {
			each(access, ul)
		}
	}
	return nil
}

// manages reports whether id administers anything: admins, and
// instructors of at least one namespace.
func (d *Dashboard) manages(ctx context.Context, id session.Identity) bool {
	if d.Policy.IsAdmin(id) {
		return true
	}
	return len(d.instructedNamespaces(ctx, id)) > 0 || len(d.staffedCourses(ctx, id)) > 0
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
		gwpages.Error(w, r, http.StatusInternalServerError, "could not list environments")
		return
	}
	var offers []provision.Candidate
	if d.Provisioner != nil {
		candidates, err := d.Provisioner.Candidates(ctx, id)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing templates to offer")
		}
		for _, c := range candidates {
			// An environment from that template exists, whatever its
			// name (names chosen under earlier rules stay).
			if !slices.ContainsFunc(rows, func(r Row) bool {
				return r.Namespace == c.Namespace && r.User == id.User && r.TemplateKind == c.Ref.Kind && r.Template == c.Ref.Name
			}) {
				offers = append(offers, c)
			}
		}
	}
	render(w, http.StatusOK, "home.html", struct {
		Page
		Rows    []Row
		Offers  []provision.Candidate
		Courses []CourseCard
		Now     time.Time
	}{d.pageFor(ctx, r, id, "Your environments"), rows, offers, d.courseCards(ctx, id), d.now()})
}
