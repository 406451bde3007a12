package dashboard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/apiverdict"
	"github.com/userland-dev/userland/internal/describe"
	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/gateway/authz"
	gwpages "github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// errForbidden is an action the user may not take; it looks like a missing
// environment.
var errForbidden = errors.New("no such environment")

// action performs a POSTed action and redirects back.
func (d *Dashboard) action(w http.ResponseWriter, r *http.Request, id session.Identity) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		gwpages.Error(w, r, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	if !d.CSRF.CheckCSRF(r, r.PostFormValue("csrf")) {
		gwpages.Error(w, r, http.StatusForbidden, "the form expired; reload the page and try again")
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
	case "keep-running":
		flash, err = d.keepRunning(ctx, id, key)
	case "grant":
		flash, err = d.grant(ctx, id, key, r.PostFormValue("hours"), r.PostFormValue("granted"))
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
	return fmt.Sprintf("%s %s.", capitalise(done), rowOf(ul, access).Label), nil
}

// keepRunning answers an idle warning: it counts as use, so the stop
// moves a full timeout away. Anyone who may open the environment may.
func (d *Dashboard) keepRunning(ctx context.Context, id session.Identity, key types.NamespacedName) (string, error) {
	ul, _ := d.Policy.Check(ctx, d.Reader, id, key)
	if ul == nil || d.KeepRunning == nil {
		return "", errForbidden
	}
	if err := d.KeepRunning(ctx, key, ul.UID); err != nil {
		return "", fmt.Errorf("keeping %s running: %w", key, err)
	}
	return fmt.Sprintf("%s keeps running.", describe.Title(ul)), nil
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
			return fmt.Sprintf("Created %s.", cmp.Or(c.DisplayName, c.Ref.Name)), nil
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
	// Replaced: the name now holds another Userland than the one the page
	// showed. Said as for one that is gone, so the page tells nobody that
	// someone else's now exists under that name.
	if errors.Is(err, errForbidden) || actions.Replaced(err) {
		return "That environment does not exist or is not yours."
	}
	if errors.Is(err, actions.ErrSuspendedByStaff) {
		return "An administrator or instructor suspended this environment, so only they can start it again."
	}
	if apiverdict.NamespaceTerminating(err) {
		return "That environment's namespace is being deleted, so nothing can be created there."
	}
	if apiverdict.Uncertain(err) {
		return "The cluster could not be reached in time, so the change may or may not have been made. Reload the page in a minute to see."
	}
	if apiverdict.Unreachable(err) {
		return "The cluster could not be reached, so nothing was changed. Try again in a minute."
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && len(msg)-i < 200 {
		msg = msg[i+2:]
	}
	return "The action failed: " + msg
}
