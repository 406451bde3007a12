package dashboard

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/gateway/authz"
	gwpages "github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// Filter narrows the admin view.
type Filter struct {
	Namespace, Template, Course, Phase string
	// User keeps environments whose user contains it, ignoring case.
	User string
	// IdleMinutes keeps environments idle for more than this many minutes.
	IdleMinutes int
}

// phases are the phases the list pages filter by.
var phases = []string{"Pending", "Starting", "Ready", "Stopped", "Failed"}

// phaseOf is ul's phase as the pages show it: Pending before the
// controller has written one.
func phaseOf(ul *v1alpha1.Userland) string {
	return cmp.Or(string(ul.Status.Phase), string(v1alpha1.PhasePending))
}

// userMatches reports whether user contains the filter's text, ignoring
// case; lower is that text already lower-cased.
func userMatches(user, lower string) bool {
	return lower == "" || strings.Contains(strings.ToLower(user), lower)
}

// adminFilter reads the admin page's filters, refusing values no page
// offers (errQuery).
func adminFilter(q url.Values) (Filter, error) {
	var f Filter
	var err error
	for key, into := range map[string]*string{"namespace": &f.Namespace, "template": &f.Template, "course": &f.Course, "user": &f.User} {
		if *into, err = filterValue(q, key); err != nil {
			return f, err
		}
	}
	if f.Phase, err = oneOf(q, "phase", phases); err != nil {
		return f, err
	}
	f.IdleMinutes, err = idleMinutes(q)
	return f, err
}

// query is f as a page link's query.
func (f Filter) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"namespace": f.Namespace, "template": f.Template, "course": f.Course, "user": f.User, "phase": f.Phase} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.IdleMinutes > 0 {
		q.Set("idle", strconv.Itoa(f.IdleMinutes))
	}
	return q
}

func (f Filter) keep(ul *v1alpha1.Userland, now time.Time, lowerUser string) bool {
	switch {
	case f.Namespace != "" && ul.Namespace != f.Namespace:
		return false
	case f.Template != "" && ul.Spec.TemplateRef.Name != f.Template:
		return false
	case f.Course != "" && ul.Labels[v1alpha1.LabelCourse] != f.Course:
		return false
	case f.Phase != "" && phaseOf(ul) != f.Phase:
		return false
	case !userMatches(ul.Spec.User, lowerUser):
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

// admin lists, a page at a time, every environment id may reach as
// admin or instructor. Rows, counts, filter choices and page numbers all
// come from what d.reachable admits for id: a page past the end, or a
// filter naming someone else's namespace, shows what an empty list
// would, so paging reveals nothing the rule hides.
func (d *Dashboard) admin(w http.ResponseWriter, r *http.Request, id session.Identity) {
	ctx := r.Context()
	if !d.manages(ctx, id) {
		gwpages.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	f, err := adminFilter(q)
	page, limit, perr := paging(q)
	if err = cmp.Or(err, perr); err != nil {
		gwpages.Error(w, r, http.StatusBadRequest, err.Error())
		return
	}
	now := d.now()
	lowerUser := strings.ToLower(f.User)
	// Only the page's rows are built (rowOf); the rest are counted.
	var kept, all []*v1alpha1.Userland
	reasons := map[*v1alpha1.Userland]authz.Reason{}
	namespaces, templates, courses := set{}, set{}, set{}
	err = d.reachable(ctx, id, func(reason authz.Reason, ul *v1alpha1.Userland) {
		all = append(all, ul)
		// The filter choices come from what the user may see, not the cluster.
		namespaces.add(ul.Namespace)
		templates.add(ul.Spec.TemplateRef.Name)
		courses.add(ul.Labels[v1alpha1.LabelCourse])
		if f.keep(ul, now, lowerUser) {
			kept = append(kept, ul)
			reasons[ul] = reason
		}
	})
	if err != nil {
		gwpages.Error(w, r, http.StatusInternalServerError, "could not list environments")
		return
	}
	slices.SortFunc(kept, byKey)
	pager, lo, hi := paginate(AdminPath, f.query(), len(kept), page, limit)
	rows := make([]Row, 0, hi-lo)
	// Budget figures sum what the viewer may reach, unfiltered: a
	// student's hours are those of all their environments of a course.
	sharing := course.NewBudgetSharing(all, d.courses(ctx))
	grantable := d.grantableHere(ctx, id)
	for _, ul := range kept[lo:hi] {
		row := withUsage(rowOf(ul, reasons[ul]), ul, sharing, now)
		row.CanGrant = row.Budgeted && grantable(ul)
		rows = append(rows, row)
	}
	render(w, http.StatusOK, "admin.html", struct {
		Page
		Rows                           []Row
		Pager                          Pager
		Filter                         Filter
		Namespaces, Templates, Courses []string
		Phases                         []string
		Now                            time.Time
		// Back returns an action to this very page.
		Back string
	}{d.pageFor(ctx, r, id, "All environments"), rows, pager, f, namespaces.sorted(), templates.sorted(), courses.sorted(),
		phases, now, pageBack(AdminPath, f.query(), pager.Page, limit)})
}

// pageBack is the address of a list page as shown, for actions to return
// to.
func pageBack(path string, q url.Values, page, limit int) string {
	if page > 1 {
		q.Set("page", strconv.Itoa(page))
	}
	if limit != DefaultLimit {
		q.Set("limit", strconv.Itoa(limit))
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// byKey orders environments by namespace, then name.
func byKey(a, b *v1alpha1.Userland) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// set collects distinct non-empty strings.
type set map[string]struct{}

func (s set) add(v string) {
	if v != "" {
		s[v] = struct{}{}
	}
}

func (s set) sorted() []string {
	out := make([]string, 0, len(s))
	for v := range s {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// StatusEntry is one environment in the progress script's JSON.
type StatusEntry struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	Phase        string `json:"phase"`
	Message      string `json:"message"`
	Event        string `json:"event,omitempty"`
	URL          string `json:"url"`
	LastActivity string `json:"lastActivity"`
	// IdleStop is "in 4 min" while an idle stop is near, else empty.
	IdleStop      string `json:"idleStop,omitempty"`
	UpdatePending bool   `json:"updatePending"`
	Running       bool   `json:"running"`
}

// eventTTL is how long an environment's latest event is served from
// memory: the progress script polls every 2 s from every open tab, and
// each list goes to the API server, whose budget every user shares.
const eventTTL = 5 * time.Second

// eventCache remembers each environment's latest event for eventTTL, for
// every user and tab polling it. Polls arriving together wait for one
// list rather than making one each.
type eventCache struct {
	once    sync.Once
	mu      sync.Mutex
	entries *lru.Cache // "namespace/name" → *eventEntry
}

type eventEntry struct {
	mu   sync.Mutex
	at   time.Time
	text string
}

// entry returns key's entry; at most eventKeys are kept, so the cache
// stays small however many environments are watched.
func (c *eventCache) entry(key string) *eventEntry {
	c.once.Do(func() { c.entries = lru.New(eventKeys) })
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries.Get(key); ok {
		return e.(*eventEntry)
	}
	e := &eventEntry{}
	c.entries.Add(key, e)
	return e
}

const eventKeys = 4096

// latestEvent returns the newest event about an environment in plain
// words, e.g. "Stopped: environment scaled to zero (Suspended)", at most
// eventTTL old.
// Only the events of this Userland (uid) count: an earlier one of its name
// (deleted, another user's) left events under the same name.
func (d *Dashboard) latestEvent(ctx context.Context, ns, name string, uid types.UID) string {
	if d.Events == nil {
		return ""
	}
	e := d.events.entry(ns + "/" + name + "/" + string(uid))
	e.mu.Lock()
	defer e.mu.Unlock()
	if now := time.Now(); e.at.IsZero() || now.Sub(e.at) >= eventTTL {
		e.text, e.at = d.listLatestEvent(ctx, ns, name, uid), now
	}
	return e.text
}

// listLatestEvent reads an environment's newest event from the API server.
func (d *Dashboard) listLatestEvent(ctx context.Context, ns, name string, uid types.UID) string {
	var events corev1.EventList
	if err := d.Events.List(ctx, &events, client.InNamespace(ns),
		client.MatchingFields{"involvedObject.kind": "Userland", "involvedObject.name": name, "involvedObject.uid": string(uid)}); err != nil {
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

// until says how soon t is, e.g. "in 4 min".
func until(now time.Time, t *time.Time) string {
	d := t.Sub(now).Round(time.Second)
	switch {
	case d < time.Minute:
		return "in less than a minute"
	case d < time.Hour:
		return fmt.Sprintf("in %d min", int(d.Minutes()))
	}
	return "at " + t.Local().Format("15:04")
}

// ago says when an environment was last used, from its activity record,
// in words: "not yet", "now", "5 minutes ago", "3 hours ago", or the date
// after two days.
func ago(now time.Time, t *time.Time) string {
	if t == nil {
		return "not yet"
	}
	d := now.Sub(*t)
	plural := func(n int, unit string) string {
		if n == 1 {
			return "1 " + unit + " ago"
		}
		return fmt.Sprintf("%d %ss ago", n, unit)
	}
	switch {
	case d < time.Minute:
		return "now"
	case d < time.Hour:
		return plural(int(d.Minutes()), "minute")
	case d < 48*time.Hour:
		return plural(int(d.Hours()), "hour")
	}
	return t.Format("2006-01-02")
}

// status answers the progress script: the user's own environments, or
// with ?all=1 everything they may reach, a page at a time with the admin
// page's filters and paging (a 10,000-environment answer would be
// megabytes for one poll), with the latest event for their own starting
// or failing ones. The page's total and its next page are in the
// X-Total-Count and Link headers.
func (d *Dashboard) status(w http.ResponseWriter, r *http.Request, id session.Identity) {
	ctx := r.Context()
	q := r.URL.Query()
	all := q.Get("all") == "1"
	var rows []Row
	var err error
	if all {
		if rows, err = d.statusPage(ctx, w, q, id); isQueryError(err) {
			gwpages.Error(w, r, http.StatusBadRequest, err.Error())
			return
		}
	} else {
		rows, err = d.visible(ctx, id, func(a authz.Reason, _ *v1alpha1.Userland) bool { return a == authz.Owner })
	}
	if err != nil {
		gwpages.Error(w, r, http.StatusInternalServerError, "could not list environments")
		return
	}
	now := d.now()
	out := make([]StatusEntry, 0, len(rows))
	for _, row := range rows {
		e := StatusEntry{
			Namespace: row.Namespace, Name: row.Name, Phase: row.Phase, Message: row.Message, URL: row.URL,
			LastActivity: ago(now, row.LastActivity), UpdatePending: row.UpdatePending, Running: row.Running,
		}
		if row.IdleStopAt != nil {
			e.IdleStop = until(now, row.IdleStopAt)
		}
		if !all && (row.Phase == string(v1alpha1.PhaseStarting) || row.Phase == string(v1alpha1.PhaseFailed) || row.Phase == string(v1alpha1.PhasePending)) {
			e.Event = d.latestEvent(ctx, row.Namespace, row.Name, row.UID)
		}
		out = append(out, e)
	}
	writeJSON(w, out)
}

// statusPage is the status feed's ?all=1: one page of what id may reach,
// filtered and paged as the admin page is, its total and next page set
// in w's headers. Query errors are errQuery.
func (d *Dashboard) statusPage(ctx context.Context, w http.ResponseWriter, q url.Values, id session.Identity) ([]Row, error) {
	f, err := adminFilter(q)
	page, limit, perr := paging(q)
	if err = cmp.Or(err, perr); err != nil {
		return nil, err
	}
	now, lowerUser := d.now(), strings.ToLower(f.User)
	var kept []*v1alpha1.Userland
	reasons := map[*v1alpha1.Userland]authz.Reason{}
	err = d.reachable(ctx, id, func(reason authz.Reason, ul *v1alpha1.Userland) {
		if f.keep(ul, now, lowerUser) {
			kept = append(kept, ul)
			reasons[ul] = reason
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(kept, byKey)
	fq := f.query()
	fq.Set("all", "1")
	pager, lo, hi := paginate(StatusPath, fq, len(kept), page, limit)
	w.Header().Set("X-Total-Count", strconv.Itoa(pager.Total))
	if pager.Next != "" {
		w.Header().Set("Link", "<"+pager.Next+`>; rel="next"`)
	}
	rows := make([]Row, 0, hi-lo)
	for _, ul := range kept[lo:hi] {
		rows = append(rows, rowOf(ul, reasons[ul]))
	}
	return rows, nil
}
