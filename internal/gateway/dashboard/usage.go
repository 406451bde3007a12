package dashboard

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/describe"
	"github.com/userland-dev/userland/internal/gateway/auth"
	gwpages "github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// withUsage adds ul's budget use at now to its row: computed on read from
// status, so a running environment's figure moves without any write.
func withUsage(row Row, ul *v1alpha1.Userland, now time.Time) Row {
	if u := ul.Status.Usage; u != nil {
		row.Budgeted = true
		row.Usage = describe.Usage(u, now)
		row.UsedSeconds = budget.Used(u, now)
		row.RemainingSeconds = max(0, budget.Remaining(u, now))
	}
	return row
}

// budgetGrant is the permission behind the course page's "Grant hours":
// RBAC's custom verb grant on the course, asked of the API server. Being
// listed as the course's staff is not enough; the webhook asks the same
// of whoever writes the grant (here the gateway, which holds it).
func budgetGrant(c *v1alpha1.Course) access.Action {
	return access.Action{Verb: v1alpha1.VerbGrant, Group: v1alpha1.GroupVersion.Group, Resource: "courses", Namespace: c.Namespace, Name: c.Name}
}

// mayGrant is nil when RBAC lets id grant budget in c.
func (d *Dashboard) mayGrant(ctx context.Context, id session.Identity, c *v1alpha1.Course) error {
	return d.Access.Require(ctx, d.rbacSubject(id), budgetGrant(c))
}

// maxGrantForm bounds one press of the button; budget.MaxGrantHours
// bounds a period's total.
const maxGrantForm = 100

// courseGrant grants the hours of the form to one student environment of
// c, recorded as id; the controller records the event.
func (d *Dashboard) courseGrant(w http.ResponseWriter, r *http.Request, id session.Identity, c *v1alpha1.Course) {
	ctx := r.Context()
	back := coursePage(c)
	if err := d.mayGrant(ctx, id, c); err != nil {
		var denied *access.Denied
		if errors.As(err, &denied) {
			gwpages.Error(w, r, http.StatusForbidden, fmt.Sprintf("Granting hours needs the verb grant on %s: Kubernetes does not let %s. "+
				"Being listed as staff is not enough; ask an administrator for the userland-budget-granter role in namespace %s.",
				courseNoun(denied.Action), denied.User, c.Namespace))
			return
		}
		gwpages.Error(w, r, http.StatusServiceUnavailable, "Whether you may grant hours could not be checked with the cluster, so nothing was changed. Try again in a minute.")
		return
	}
	hours, err := strconv.ParseInt(r.PostFormValue("hours"), 10, 64)
	if err != nil || hours < 1 || hours > maxGrantForm {
		gwpages.Error(w, r, http.StatusBadRequest, fmt.Sprintf("hours must be a whole number from 1 to %d", maxGrantForm))
		return
	}
	var ul v1alpha1.Userland
	key := types.NamespacedName{Namespace: c.Namespace, Name: r.PostFormValue("userland")}
	if err := d.Reader.Get(ctx, key, &ul); err != nil || ul.Labels[v1alpha1.LabelCourse] != c.Name ||
		!course.Provisioned(c, &ul) || course.RoleOf(c, &ul) != course.Student {
		gwpages.Error(w, r, http.StatusNotFound, "no such student environment in this course")
		return
	}
	patch, err := actions.GrantPatch(&ul, c, nil, hours, id.User, d.now())
	if err == nil {
		err = d.Writer.Patch(ctx, &ul, patch, client.FieldOwner("userland-dashboard"))
	}
	if err != nil {
		http.Redirect(w, r, auth.SafeReturnPath(back+"&error="+urlQueryEscape(plainError(err))), http.StatusSeeOther)
		return
	}
	flash := fmt.Sprintf("Granted %s %d more hours this period.", ul.Spec.User, hours)
	http.Redirect(w, r, auth.SafeReturnPath(back+"&flash="+urlQueryEscape(flash)), http.StatusSeeOther)
}

// usageCSV writes every member's environments with their budget use:
// what the course page shows, for a spreadsheet.
func usageCSV(w http.ResponseWriter, c *v1alpha1.Course, members []CourseMember) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", c.Name+"-usage.csv"))
	w.Header().Set("Cache-Control", "no-store")
	out := csv.NewWriter(w)
	_ = out.Write([]string{"user", "role", "environment", "template", "phase", "used_hours", "remaining_hours"})
	for _, m := range members {
		for _, row := range m.Rows {
			used, left := "", ""
			if row.Budgeted {
				used, left = hoursCell(row.UsedSeconds), hoursCell(row.RemainingSeconds)
			}
			_ = out.Write([]string{csvSafe(m.User), string(m.Role), csvSafe(row.Title), row.Template, row.Phase, used, left})
		}
	}
	out.Flush()
}

func hoursCell(seconds int64) string { return strconv.FormatFloat(float64(seconds)/3600, 'f', 2, 64) }

// csvSafe keeps a spreadsheet from reading a cell as a formula (CSV
// injection): names come from identity providers and rosters.
func csvSafe(s string) string {
	if s != "" && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r') {
		return "'" + s
	}
	return s
}

// mostUsed is a member's highest use, for sorting the roster by usage.
func mostUsed(m CourseMember) int64 {
	var most int64 = -1
	for _, row := range m.Rows {
		if row.Budgeted {
			most = max(most, row.UsedSeconds)
		}
	}
	return most
}
