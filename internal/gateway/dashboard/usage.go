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
	"github.com/userland-dev/userland/internal/budgetsource"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/describe"
	"github.com/userland-dev/userland/internal/gateway/auth"
	gwpages "github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// withUsage adds ul's budget use at now to its row: computed on read from
// status, so a running environment's figure moves without any write. A
// course's budget is the student's: the figures are those of all their
// environments of the course the viewer may reach (sharing).
func withUsage(row Row, ul *v1alpha1.Userland, sharing course.BudgetSharing, now time.Time) Row {
	if u := ul.Status.Usage; u != nil {
		others := sharing.Of(ul)
		p := budget.Pool(u, others, now)
		row.Budgeted = true
		row.Granted = ul.Annotations[v1alpha1.AnnotationBudgetGrant]
		row.Usage = describe.Usage(u, others, now)
		row.UsedSeconds = p.Used
		row.RemainingSeconds = max(0, p.Remaining)
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

// courses reads Courses from the gateway's cache, each once per page.
func (d *Dashboard) courses(ctx context.Context) course.CourseLookup {
	return course.Remembered(func(namespace, name string) (*v1alpha1.Course, error) {
		var c v1alpha1.Course
		err := d.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &c)
		return &c, err
	})
}

// grantableHere says whether the admin page offers id "Grant hours" on
// ul: one outside a course (a course's students are granted on its page,
// by the course's grant verb) that RBAC lets id grant. It asks once per
// namespace whether id may grant any Userland there, and only when not,
// for the row itself (a Role with resourceNames): a page of budgeted rows
// in one namespace costs one review, not one per row.
func (d *Dashboard) grantableHere(ctx context.Context, id session.Identity) func(ul *v1alpha1.Userland) bool {
	anyIn := map[string]bool{}
	return func(ul *v1alpha1.Userland) bool {
		src, err := budgetsource.Of(ctx, d.Reader, ul)
		if err != nil || src.Spec == nil || src.Course != nil {
			return false
		}
		act := src.GrantAction(ul)
		may, asked := anyIn[ul.Namespace]
		if !asked {
			whole := act
			whole.Name = ""
			may = d.Access.Require(ctx, d.rbacSubject(id), whole) == nil
			anyIn[ul.Namespace] = may
		}
		return may || d.Access.Require(ctx, d.rbacSubject(id), act) == nil
	}
}

// grant grants hours to one environment outside a course that id may
// reach and RBAC lets id grant, recorded as id; the controller records
// the event. One id cannot reach looks like none at all.
func (d *Dashboard) grant(ctx context.Context, id session.Identity, key types.NamespacedName, form, seen string) (string, error) {
	ul, _ := d.Policy.Check(ctx, d.Reader, id, key)
	if ul == nil {
		return "", errForbidden
	}
	src, err := budgetsource.Of(ctx, d.Reader, ul)
	switch {
	case err != nil:
		return "", errors.New("the environment's budget could not be read, so nothing was changed; try again in a minute")
	case src.Course != nil:
		return "", fmt.Errorf("%s belongs to course %s, so grant hours on the course's page", describe.Title(ul), src.Course.Name)
	case src.Spec == nil:
		return "", fmt.Errorf("no compute-hour budget governs %s, so there are no hours to grant", describe.Title(ul))
	}
	if err := d.Access.Require(ctx, d.rbacSubject(id), src.GrantAction(ul)); err != nil {
		var denied *access.Denied
		if errors.As(err, &denied) {
			// No ": " in the words: plainError shows what follows the last.
			return "", fmt.Errorf("granting hours needs the verb grant on userland %s in namespace %s, which Kubernetes does not give %s; ask an administrator for the userland-budget-granter role there",
				ul.Name, ul.Namespace, denied.User)
		}
		return "", errors.New("whether you may grant hours could not be checked with the cluster, so nothing was changed; try again in a minute")
	}
	hours, err := strconv.ParseInt(form, 10, 64)
	if err != nil || hours < 1 || hours > maxGrantForm {
		return "", fmt.Errorf("hours must be a whole number from 1 to %d", maxGrantForm)
	}
	if err := actions.GrantIfUnchanged(ctx, d.Live, d.Writer, ul, nil, src.Template, hours, id.User, d.now(), seen, client.FieldOwner("userland-dashboard")); err != nil {
		return "", fmt.Errorf("granting hours to %s: %w", key, err)
	}
	return fmt.Sprintf("Granted %s %d more hours this period on %s.", ul.Spec.User, hours, describe.Title(ul)), nil
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
	// Only an environment this course's budget governs takes a grant on
	// the course; anything else is not this page's to grant.
	if err := d.Reader.Get(ctx, key, &ul); err != nil || !course.BudgetGoverns(c, &ul) {
		gwpages.Error(w, r, http.StatusNotFound, "no such student environment under this course's budget")
		return
	}
	if err := actions.GrantIfUnchanged(ctx, d.Live, d.Writer, &ul, c, nil, hours, id.User, d.now(), r.PostFormValue("granted"), client.FieldOwner("userland-dashboard")); err != nil {
		http.Redirect(w, r, auth.SafeReturnPath(back+"&error="+urlQueryEscape(plainError(err))), http.StatusSeeOther)
		return
	}
	flash := fmt.Sprintf("Granted %s %d more hours this period.", ul.Spec.User, hours)
	http.Redirect(w, r, auth.SafeReturnPath(back+"&flash="+urlQueryEscape(flash)), http.StatusSeeOther)
}

// usageCSV writes every member's environments with their budget use:
// what the course page shows, for a spreadsheet. A student's hours are
// one budget for all their environments of the course, so each of their
// rows repeats the student's figures: sum by student, not by row.
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
