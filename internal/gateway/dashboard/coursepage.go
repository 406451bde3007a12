package dashboard

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/describe"
	"github.com/userland-dev/userland/internal/gateway/authz"
	gwpages "github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// NoEnvironment is the course page's phase filter for members with no
// environment the viewer may open.
const NoEnvironment = "none"

// CourseFilter narrows a course page's roster.
type CourseFilter struct {
	// User keeps members whose name contains it, ignoring case.
	User string
	// Phase keeps members with an environment in it (and only those
	// environments), or NoEnvironment those without one.
	Phase string
	// Sort is SortUser (the default) or SortUsage (the most used first).
	Sort string
}

// The course page's orders.
const (
	SortUser  = "user"
	SortUsage = "usage"
)

func courseFilter(q url.Values) (CourseFilter, error) {
	var f CourseFilter
	var err error
	if f.User, err = filterValue(q, "user"); err != nil {
		return f, err
	}
	if f.Phase, err = oneOf(q, "phase", append(slices.Clone(phases), NoEnvironment)); err != nil {
		return f, err
	}
	f.Sort, err = oneOf(q, "sort", []string{SortUser, SortUsage})
	return f, err
}

// keep is m as the filter shows it, and whether it shows at all.
func (f CourseFilter) keep(m CourseMember, lowerUser string) (CourseMember, bool) {
	if !userMatches(m.User, lowerUser) {
		return m, false
	}
	switch f.Phase {
	case "":
		return m, true
	case NoEnvironment:
		return m, len(m.Rows) == 0
	}
	var rows []Row
	for _, row := range m.Rows {
		if row.State == f.Phase {
			rows = append(rows, row)
		}
	}
	m.Rows = rows
	return m, len(rows) > 0
}

// maxQueueShown bounds the queue list: at a class start most of a large
// course can be waiting, and the roster pages through them all.
const maxQueueShown = 50

// coursePage shows a course to its staff (and admins): its roster a page
// at a time, each member with the environments the viewer may reach.
// Rows come only from the batch's access rule, so the counts and pages of
// a filter are those of what the viewer may see.
func (d *Dashboard) coursePage(w http.ResponseWriter, r *http.Request, id session.Identity, c *v1alpha1.Course) {
	ctx := r.Context()
	q := r.URL.Query()
	f, err := courseFilter(q)
	page, limit, perr := paging(q)
	if err = cmp.Or(err, perr); err != nil {
		gwpages.Error(w, r, http.StatusBadRequest, err.Error())
		return
	}
	items, err := d.courseUserlands(ctx, c)
	if err != nil {
		gwpages.Error(w, r, http.StatusInternalServerError, "could not list environments")
		return
	}
	byUser := map[string]*CourseMember{}
	decide := d.Policy.NewBatch(d.Reader, id)
	var (
		queue     []Row
		reachable []*v1alpha1.Userland
		reasons   []authz.Reason
	)
	for i := range items {
		ul := &items[i]
		reason := decide.Reason(ctx, ul)
		if reason == "" {
			// Carrying the course's label does not make an environment
			// the course's: staff learn nothing of one they cannot reach.
			continue
		}
		reachable, reasons = append(reachable, ul), append(reasons, reason)
	}
	sharing := course.NewBudgetSharing(reachable, course.OneCourse(c))
	for i, ul := range reachable {
		reason := reasons[i]
		m := byUser[ul.Spec.User]
		if m == nil {
			m = &CourseMember{User: ul.Spec.User, Role: course.RoleOf(c, ul)}
			byUser[ul.Spec.User] = m
		}
		row := withUsage(rowOf(ul, reason), ul, sharing, d.now())
		m.Rows = append(m.Rows, row)
		if row.Phase == string(v1alpha1.StoppedQueued) {
			queue = append(queue, row)
		}
	}
	for _, u := range c.Spec.Students.Users {
		if byUser[u] == nil {
			byUser[u] = &CourseMember{User: u, Role: course.Student}
		}
	}
	for _, u := range c.Spec.Staff.Users {
		if byUser[u] == nil {
			byUser[u] = &CourseMember{User: u, Role: course.Staff}
		}
	}
	lowerUser := strings.ToLower(f.User)
	members := make([]CourseMember, 0, len(byUser))
	for _, m := range byUser {
		if shown, ok := f.keep(*m, lowerUser); ok {
			members = append(members, shown)
		}
	}
	slices.SortFunc(members, func(a, b CourseMember) int {
		if a.Role != b.Role {
			return strings.Compare(string(b.Role), string(a.Role)) // students, then staff
		}
		if f.Sort == SortUsage {
			if c := cmp.Compare(mostUsed(b), mostUsed(a)); c != 0 {
				return c // the most used first
			}
		}
		return strings.Compare(a.User, b.User)
	})
	if q.Get("format") == "csv" {
		usageCSV(w, c, members)
		return
	}
	filterQuery := f.query(c)
	pager, lo, hi := paginate(CoursePath, filterQuery, len(members), page, limit)
	slices.SortFunc(queue, func(a, b Row) int { return cmp.Compare(a.QueuePosition, b.QueuePosition) })
	queued := len(queue)
	queue = queue[:min(queued, maxQueueShown)]
	// What the page offers beyond the roster: only what RBAC allows; the
	// POST asks again.
	changeErr := d.mayChangeCourse(ctx, id, c)
	var cannotChange string
	if changeErr != nil {
		var status int
		if status, cannotChange = courseChangeRefusal(changeErr); status != http.StatusForbidden {
			ctrl.LoggerFrom(ctx).Error(changeErr, "checking a course change with the API server", "course", c.Name)
		}
	}
	canGrant := c.Spec.Limits.Budget != nil && d.mayGrant(ctx, id, c) == nil
	var problems []string
	for _, cond := range c.Status.Conditions {
		if cond.Status != "True" && cond.Type != v1alpha1.ConditionReady {
			problems = append(problems, cond.Message)
		}
	}
	if ready := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady); ready != nil && ready.Status != "True" && len(problems) == 0 {
		problems = append(problems, ready.Message)
	}
	now := d.now()
	render(w, http.StatusOK, "course.html", struct {
		Page
		Course  *v1alpha1.Course
		Phase   v1alpha1.CoursePhase
		Members []CourseMember
		// Roster counts every member before the filter.
		Roster   int
		Pager    Pager
		Filter   CourseFilter
		Phases   []string
		Queue    []Row
		Queued   int
		Problems []string
		Back     string
		Now      time.Time
		// CanChange offers the roster import and the whole-course
		// actions; CannotChange says why they are missing.
		CanChange    bool
		CannotChange string
		// CanGrant offers "Grant hours" on students' rows: RBAC's grant.
		CanGrant bool
		// UsageQuery is the roster's query sorted by usage; CSVQuery as CSV.
		UsageQuery, CSVQuery string
		// Session is the next (or current) session of the timetable, as
		// describe tells it; "" without one.
		Session string
	}{d.pageFor(ctx, r, id, "Course: "+courseTitle(c)), c, course.PhaseAt(c, now), members[lo:hi], len(byUser), pager, f,
		append(slices.Clone(phases), NoEnvironment), queue, queued, problems,
		pageBack(CoursePath, filterQuery, pager.Page, limit), now, changeErr == nil, cannotChange,
		canGrant, withQuery(filterQuery, "sort", SortUsage), withQuery(filterQuery, "format", "csv"), describe.Session(c, now)})
}

// withQuery is q with key set to value, encoded.
func withQuery(q url.Values, key, value string) string {
	out := url.Values{}
	for k, v := range q {
		out[k] = slices.Clone(v)
	}
	out.Set(key, value)
	return out.Encode()
}

// query is f on c's page as a link's query.
func (f CourseFilter) query(c *v1alpha1.Course) url.Values {
	q := url.Values{"namespace": {c.Namespace}, "name": {c.Name}}
	if f.User != "" {
		q.Set("user", f.User)
	}
	if f.Phase != "" {
		q.Set("phase", f.Phase)
	}
	if f.Sort != "" {
		q.Set("sort", f.Sort)
	}
	return q
}
