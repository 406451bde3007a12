package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
	gwpages "github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/roster"
)

// maxRosterBytes bounds an upload (a 5000-row roster is well under 1 MiB).
const maxRosterBytes = 2 << 20

// importRoster creates Userlands from an uploaded CSV (user, namespace,
// template) and shows a report of every row.
func (d *Dashboard) importRoster(w http.ResponseWriter, r *http.Request, id session.Identity) {
	ctx := r.Context()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		gwpages.Error(w, r, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	if !d.manages(ctx, id) {
		gwpages.NotFound(w, r)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxRosterBytes)
	if err := r.ParseMultipartForm(maxRosterBytes); err != nil {
		gwpages.Error(w, r, http.StatusBadRequest, "the upload is not a roster file of at most 2 MiB")
		return
	}
	if !d.CSRF.CheckCSRF(r, r.PostFormValue("csrf")) {
		gwpages.Error(w, r, http.StatusForbidden, "the form expired; reload the page and try again")
		return
	}
	file, _, err := r.FormFile("roster")
	if err != nil {
		gwpages.Error(w, r, http.StatusBadRequest, "choose a CSV file to import")
		return
	}
	defer func() { _ = file.Close() }()
	rows, err := roster.Parse(file, []string{roster.ColumnUser, roster.ColumnNamespace, roster.ColumnTemplate}, "")
	if err != nil {
		gwpages.Error(w, r, http.StatusBadRequest, err.Error())
		return
	}
	results := roster.Import(ctx, rows, roster.Options{
		Reader: d.Reader, Writer: d.Writer, FieldOwner: "userland-dashboard",
		MayManage: d.mayCreateUserlands(ctx, id),
	})
	counts := roster.Count(results)
	render(w, http.StatusOK, "import.html", struct {
		Page
		Results                     []roster.Result
		Created, Existing, Rejected int
	}{d.pageFor(ctx, r, id, "Roster import"), results, counts[roster.Created], counts[roster.Existing], counts[roster.Rejected]})
}

// mayCreateUserlands is the roster import's rule for a namespace: the
// dashboard offers it to admins and the namespace's instructors, and the
// gateway creates the Userlands with its own rights only if RBAC would
// let the person create them (create on userlands there). Asked once per
// namespace of an import; a failed check refuses, as a denial does.
func (d *Dashboard) mayCreateUserlands(ctx context.Context, id session.Identity) func(ns string) bool {
	listed := d.namespaceManager(ctx, id)
	decided := map[string]bool{}
	return func(ns string) bool {
		if ok, seen := decided[ns]; seen {
			return ok
		}
		ok := listed(ns)
		if ok {
			err := d.Access.Require(ctx, d.rbacSubject(id), access.Action{Verb: "create", Group: v1alpha1.GroupVersion.Group, Resource: "userlands", Namespace: ns})
			if err != nil && !errors.As(err, new(*access.Denied)) {
				ctrl.LoggerFrom(ctx).Error(err, "checking a roster import with the API server", "namespace", ns)
			}
			ok = err == nil
		}
		decided[ns] = ok
		return ok
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
