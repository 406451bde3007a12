package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway/authz"
	gwpages "github.com/userland-dev/userland/internal/gateway/pages"
	"github.com/userland-dev/userland/internal/gateway/session"
)

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
		gwpages.NotFound(w, r)
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
		gwpages.Error(w, r, http.StatusInternalServerError, "could not list environments")
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
func (d *Dashboard) latestEvent(ctx context.Context, ns, name string) string {
	if d.Events == nil {
		return ""
	}
	e := d.events.entry(ns + "/" + name)
	e.mu.Lock()
	defer e.mu.Unlock()
	if now := time.Now(); e.at.IsZero() || now.Sub(e.at) >= eventTTL {
		e.text, e.at = d.listLatestEvent(ctx, ns, name), now
	}
	return e.text
}

// listLatestEvent reads an environment's newest event from the API server.
func (d *Dashboard) listLatestEvent(ctx context.Context, ns, name string) string {
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
// with ?all=1 everything they manage, with the latest event for those
// starting or failing.
func (d *Dashboard) status(w http.ResponseWriter, r *http.Request, id session.Identity) {
	ctx := r.Context()
	all := r.URL.Query().Get("all") == "1"
	rows, err := d.visible(ctx, id, func(a authz.Reason, _ *v1alpha1.Userland) bool { return all || a == authz.Owner })
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
			e.Event = d.latestEvent(ctx, row.Namespace, row.Name)
		}
		out = append(out, e)
	}
	writeJSON(w, out)
}
