package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/gateway/auth"
	gwpages "github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/roster"
)

// CourseMember is one row of a course page: a member and their
// environments (none yet for a listed student who never signed in).
type CourseMember struct {
	User string
	Role course.Role
	Rows []Row
}

// staffCourse reads the course a request names, when id may run it:
// its staff, and admins. Anyone else learns nothing of it.
func (d *Dashboard) staffCourse(ctx context.Context, r *http.Request, id session.Identity) *v1alpha1.Course {
	key := types.NamespacedName{Namespace: r.FormValue("namespace"), Name: r.FormValue("name")}
	var c v1alpha1.Course
	if key.Namespace == "" || key.Name == "" || d.Reader.Get(ctx, key, &c) != nil {
		return nil
	}
	if !d.Policy.IsAdmin(id) && !course.IsStaff(&c, id) {
		return nil
	}
	return &c
}

// course serves a course's page (GET) and its whole-course actions (POST).
func (d *Dashboard) course(w http.ResponseWriter, r *http.Request, id session.Identity) {
	ctx := r.Context()
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxRosterBytes)
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
			if err := r.ParseMultipartForm(maxRosterBytes); err != nil {
				gwpages.Error(w, r, http.StatusBadRequest, "the upload is not a roster file of at most 2 MiB")
				return
			}
		}
	}
	c := d.staffCourse(ctx, r, id)
	if c == nil {
		gwpages.NotFound(w, r)
		return
	}
	back := coursePage(c)
	switch r.Method {
	case http.MethodGet:
		d.coursePage(w, r, id, c)
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, POST")
		gwpages.Error(w, r, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	if !d.CSRF.CheckCSRF(r, r.PostFormValue("csrf")) {
		gwpages.Error(w, r, http.StatusForbidden, "the form expired; reload the page and try again")
		return
	}
	verb := r.PostFormValue("action")
	switch verb {
	case "import", "start", "stop", "restart":
	case "grant":
		// Granting asks RBAC for its own verb, not for course changes.
		d.courseGrant(w, r, id, c)
		return
	default:
		gwpages.Error(w, r, http.StatusBadRequest, "unknown action")
		return
	}
	// Every action here changes the course as a whole, which being listed
	// as staff does not allow: RBAC must (courseChange). The page offers
	// these forms only to those it allows; this refuses forged ones.
	if err := d.mayChangeCourse(ctx, id, c); err != nil {
		status, msg := courseChangeRefusal(err)
		if status != http.StatusForbidden {
			ctrl.LoggerFrom(ctx).Error(err, "checking a course change with the API server", "action", verb, "course", c.Name)
		}
		gwpages.Error(w, r, status, msg)
		return
	}
	switch verb {
	case "import":
		d.courseImport(w, r, id, c)
	case "start", "stop", "restart":
		flash, err := d.actOnCourse(ctx, c, actions.Verb(verb))
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "course action", "action", verb, "course", c.Name)
			http.Redirect(w, r, auth.SafeReturnPath(back+"&error="+urlQueryEscape(plainError(err))), http.StatusSeeOther)
			return
		}
		http.Redirect(w, r, auth.SafeReturnPath(back+"&flash="+urlQueryEscape(flash)), http.StatusSeeOther)
	}
}

// courseUserlands are the course's environments, from the cache.
func (d *Dashboard) courseUserlands(ctx context.Context, c *v1alpha1.Course) ([]v1alpha1.Userland, error) {
	var list v1alpha1.UserlandList
	if err := d.Reader.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingLabels{v1alpha1.LabelCourse: c.Name}); err != nil {
		return nil, fmt.Errorf("listing the course's environments: %w", err)
	}
	return list.Items, nil
}

// coursePage is the address of c's page.
func coursePage(c *v1alpha1.Course) string {
	return fmt.Sprintf("%s?namespace=%s&name=%s", CoursePath, urlQueryEscape(c.Namespace), urlQueryEscape(c.Name))
}

func courseTitle(c *v1alpha1.Course) string {
	if c.Spec.DisplayName != "" {
		return c.Spec.DisplayName
	}
	return c.Name
}

// actOnCourse starts, stops or restarts every environment the course made
// for its current students (course.StaffMayReach), as staff: one patch
// each. Its caller has checked that RBAC lets the person change the course.
func (d *Dashboard) actOnCourse(ctx context.Context, c *v1alpha1.Course, verb actions.Verb) (string, error) {
	items, err := d.courseUserlands(ctx, c)
	if err != nil {
		return "", err
	}
	n := 0
	for i := range items {
		ul := &items[i]
		if !course.StaffMayReach(c, ul) {
			continue
		}
		patch, err := actions.Patch(verb, actions.Staff, ul, d.now())
		if err != nil {
			return "", err
		}
		target := &v1alpha1.Userland{}
		target.Namespace, target.Name = ul.Namespace, ul.Name
		err = d.Writer.Patch(ctx, target, patch, client.FieldOwner("userland-dashboard"))
		if actions.PassOver(err) {
			// Gone, or its name now holds another Userland than the one
			// the cache showed: passed over, not counted, and no reason
			// to leave the rest of the class as it was.
			ctrl.LoggerFrom(ctx).V(1).Info("course action passed over an environment gone or replaced since the cache showed it",
				"action", verb, "userland", client.ObjectKeyFromObject(ul), "uid", ul.UID, "reason", err.Error())
			continue
		}
		if err != nil {
			return "", fmt.Errorf("%s %s/%s: %w", verb, ul.Namespace, ul.Name, err)
		}
		n++
	}
	done := map[actions.Verb]string{actions.Start: "Starting", actions.Stop: "Stopping", actions.Restart: "Restarting"}[verb]
	return fmt.Sprintf("%s %d student environments.", done, n), nil
}

// courseImport adds an uploaded roster (user, role) to the course. Its
// caller has checked that RBAC lets the person change the course: a row
// with role staff makes someone staff, who then reaches every student.
func (d *Dashboard) courseImport(w http.ResponseWriter, r *http.Request, id session.Identity, c *v1alpha1.Course) {
	ctx := r.Context()
	file, _, err := r.FormFile("roster")
	if err != nil {
		gwpages.Error(w, r, http.StatusBadRequest, "choose a CSV file to import")
		return
	}
	defer func() { _ = file.Close() }()
	rows, err := roster.ParseCourse(file)
	if err != nil {
		gwpages.Error(w, r, http.StatusBadRequest, err.Error())
		return
	}
	var results []roster.Result
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var live v1alpha1.Course
		// Straight from the API server: the merge must start from the
		// roster as it is, not as the cache last saw it.
		if err := d.Live.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
			return err
		}
		before := live.DeepCopy()
		results = roster.AddToCourse(&live.Spec, rows)
		if roster.Count(results)[roster.Created] == 0 {
			return nil
		}
		return d.Writer.Patch(ctx, &live, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), client.FieldOwner("userland-dashboard"))
	})
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "course roster import", "course", c.Name)
		gwpages.Error(w, r, http.StatusConflict, "the course could not be changed: "+plainError(err))
		return
	}
	counts := roster.Count(results)
	render(w, http.StatusOK, "course-import.html", struct {
		Page
		Course                    *v1alpha1.Course
		Results                   []roster.Result
		Added, Existing, Rejected int
		Back                      string
	}{d.pageFor(ctx, r, id, "Roster import: "+courseTitle(c)), c, results, counts[roster.Created], counts[roster.Existing], counts[roster.Rejected],
		coursePage(c)})
}
