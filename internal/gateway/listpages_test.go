package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/testobj"
)

var (
	adminRow    = regexp.MustCompile(`class="env" data-namespace="([^"]+)" data-name="([^"]+)"`)
	adminCount  = regexp.MustCompile(`<h2 id="all">Environments \((\d+)\)</h2>`)
	nextPage    = regexp.MustCompile(`<a href="([^"]+)" rel="next">`)
	courseRow   = regexp.MustCompile(`class="member" data-user="([^"]+)" data-name="([^"]+)"`)
	optionValue = regexp.MustCompile(`<option (?:selected)?>([^<]+)</option>`)
)

// adminPages walks the admin page from u by its Next links and returns
// every row ("namespace/name") and the count each page showed.
func adminPages(t *testing.T, c *http.Client, gw, u string) (rows []string, counts []string) {
	t.Helper()
	for page := 0; u != ""; page++ {
		if page > 200 {
			t.Fatalf("more than 200 pages from %s", u)
		}
		resp, body := get(t, c, gw+u, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", u, resp.Status)
		}
		for _, m := range adminRow.FindAllStringSubmatch(body, -1) {
			rows = append(rows, m[1]+"/"+m[2])
		}
		if m := adminCount.FindStringSubmatch(body); m != nil {
			counts = append(counts, m[1])
		}
		u = ""
		if m := nextPage.FindStringSubmatch(body); m != nil {
			u = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	return rows, counts
}

// TestListPagesShowOnlyWhatTheViewerReaches is the adversary at the
// paged lists: bob is listed as staff of course db, which reaches
// alice's course environment only. Paging one row at a time, filtering by
// namespace, user, course and phase, asking for pages past the end, he
// sees no row, count or filter choice of an environment the access rule
// keeps from him: not carol's (staff) course environment, not the
// namespace's other environments, nothing of a namespace where he
// reaches nothing. The administrator's pages, walked the same way, list
// every environment of the namespace once.
func TestListPagesShowOnlyWhatTheViewerReaches(t *testing.T) {
	t.Parallel()
	f := setupCourse(t)
	ctx := context.Background()
	hidden := env.Namespace(t)
	extra := []client.Object{testobj.MakeTemplate(hidden, "web").Container("web").Obj(), testobj.MakeUserland(hidden, "zed", "zed", "web").Obj()}
	for _, u := range []string{"x1", "x2", "x3"} {
		extra = append(extra, testobj.MakeUserland(f.ns, u, u, "web").Obj())
	}
	for _, o := range extra {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	f.waitCached(t, extra...)
	// The course's environments: alice's (a student's, which bob reaches)
	// and carol's and bob's (staff's own, which he does not).
	courseEnvs := map[string]string{}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var list v1alpha1.UserlandList
		if err := f.server.Reader.List(ctx, &list, client.InNamespace(f.ns), client.MatchingLabels{v1alpha1.LabelCourse: "db"}); err != nil {
			return false, nil
		}
		for _, ul := range list.Items {
			courseEnvs[ul.Spec.User] = ul.Name
		}
		return courseEnvs["alice"] != "" && courseEnvs["carol"] != "", nil
	})
	if err != nil {
		t.Fatalf("the course's environments never reached the gateway's cache: %v (have %v)", err, courseEnvs)
	}
	alices, carols := f.ns+"/"+courseEnvs["alice"], f.ns+"/"+courseEnvs["carol"]

	bob := browser(t)
	signIn(t, bob, f.gateway.URL, "bob", "bob-pw")
	mayReach := func(row string) bool {
		ns, name, _ := strings.Cut(row, "/")
		ul, _ := f.server.Policy.Check(ctx, f.server.Reader, session.Identity{User: "bob"}, types.NamespacedName{Namespace: ns, Name: name})
		return ul != nil
	}

	t.Run("every row of every page is one he reaches, each once", func(t *testing.T) {
		// Within this test's namespace: the package's other tests, running
		// beside this one, make and delete environments of their own
		// "bob"s, so an unfiltered walk's rows and counts move under it.
		rows, counts := adminPages(t, bob, f.gateway.URL, "/dashboard/admin?"+url.Values{"namespace": {f.ns}, "limit": {"1"}}.Encode())
		for _, row := range rows {
			if !mayReach(row) {
				t.Errorf("HOLE: bob sees %s", row)
			}
		}
		if !slices.Contains(rows, alices) || slices.Contains(rows, carols) {
			t.Errorf("bob's rows %v: want alice's course environment %s and not carol's %s", rows, alices, carols)
		}
		sorted := slices.Clone(rows)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != len(rows) {
			t.Errorf("a row shown twice: %v", rows)
		}
		for _, n := range counts {
			if n != counts[0] {
				t.Errorf("the count changed while paging: %v", counts)
			}
		}
	})

	t.Run("filters show nothing of what he does not reach", func(t *testing.T) {
		for _, q := range []url.Values{
			{"namespace": {hidden}},
			{"namespace": {f.ns}, "user": {"carol"}},
			{"namespace": {f.ns}, "user": {"x"}},
			{"namespace": {hidden}, "user": {"zed"}, "page": {"99999"}},
			{"namespace": {f.ns}, "course": {"db"}, "user": {"carol"}, "phase": {"Ready"}},
		} {
			rows, counts := adminPages(t, bob, f.gateway.URL, "/dashboard/admin?"+q.Encode())
			if len(rows) != 0 || len(counts) != 1 || counts[0] != "0" {
				t.Errorf("HOLE: bob filtering %v sees rows %v, counts %v", q, rows, counts)
			}
		}
		// What he reaches in the namespace: alice's course environment and
		// his own two.
		var list v1alpha1.UserlandList
		if err := f.server.Reader.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
			t.Fatal(err)
		}
		var his []string
		for _, ul := range list.Items {
			if row := f.ns + "/" + ul.Name; mayReach(row) {
				his = append(his, row)
			}
		}
		slices.Sort(his)
		if len(his) != 3 || !slices.Contains(his, alices) {
			t.Fatalf("bob reaches %v in %s; want alice's course environment and his own two", his, f.ns)
		}
		rows, counts := adminPages(t, bob, f.gateway.URL, "/dashboard/admin?"+url.Values{"namespace": {f.ns}, "limit": {"1"}, "page": {"12345"}}.Encode())
		if !slices.Equal(rows, his[2:]) || !slices.Equal(counts, []string{"3"}) {
			t.Errorf("bob's namespace filter, a page past the end: rows %v, counts %v; want the last of %v, count 3", rows, counts, his)
		}
		_, body := get(t, bob, f.gateway.URL+"/dashboard/admin", nil)
		for _, m := range optionValue.FindAllStringSubmatch(body, -1) {
			if m[1] == hidden {
				t.Errorf("HOLE: bob is offered the namespace %s, where he reaches nothing", hidden)
			}
		}
	})

	t.Run("the course page, filtered, shows no environment he does not reach", func(t *testing.T) {
		for _, q := range []string{"", "&user=carol", "&user=carol&phase=Ready", "&user=carol&phase=Stopped", "&phase=Ready", "&limit=1&page=3"} {
			resp, body := get(t, bob, f.page+q, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("course page %s: %s", q, resp.Status)
			}
			for _, m := range courseRow.FindAllStringSubmatch(body, -1) {
				if !mayReach(f.ns + "/" + m[2]) {
					t.Errorf("HOLE: bob's course page %q shows %s's %s", q, m[1], m[2])
				}
			}
			if strings.Contains(body, courseEnvs["carol"]) {
				t.Errorf("HOLE: bob's course page %q names carol's environment", q)
			}
		}
		// carol has a course environment bob may not open: by phase, the
		// page says no more than it does of any staff member without one.
		for _, phase := range []string{"Ready", "Stopped", "Starting", "Pending"} {
			_, body := get(t, bob, f.page+"&user=carol&phase="+phase, nil)
			if !strings.Contains(body, "No members match.") {
				t.Errorf("HOLE: bob filtering carol by phase %s learns she has an environment in it", phase)
			}
		}
	})

	t.Run("hostile queries get a 400, never more", func(t *testing.T) {
		long := strings.Repeat("a", 5000)
		for _, q := range []string{"page=-1", "page=0", "page=abc", "page=99999999999999999999999999", "limit=0", "limit=-3",
			"limit=lots", "user=" + long, "namespace=" + long, "course=" + long, "phase=" + url.QueryEscape("<script>"), "idle=-1", "idle=x"} {
			for _, u := range []string{"/dashboard/admin?" + q, strings.TrimPrefix(f.page, f.gateway.URL) + "&" + q} {
				if strings.HasPrefix(u, "/dashboard/course") && (strings.HasPrefix(q, "namespace=") || strings.HasPrefix(q, "course=") || strings.HasPrefix(q, "idle=")) {
					continue // not the course page's filters
				}
				resp, body := get(t, bob, f.gateway.URL+u, nil)
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("%.80s: %s, want 400\n%.300s", u, resp.Status, body)
				}
			}
		}
		// A huge limit is capped, not refused.
		if resp, _ := get(t, bob, f.gateway.URL+"/dashboard/admin?limit=999999999999", nil); resp.StatusCode != http.StatusOK {
			t.Errorf("a huge limit: %s, want it capped", resp.Status)
		}
		// Someone who manages nothing learns nothing, whatever the query.
		alice := browser(t)
		signIn(t, alice, f.gateway.URL, "alice", "alice-pw")
		for _, q := range []string{"", "page=-1", "namespace=" + f.ns} {
			if resp, _ := get(t, alice, f.gateway.URL+"/dashboard/admin?"+q, nil); resp.StatusCode != http.StatusNotFound {
				t.Errorf("alice (a student) at the admin page ?%s: %s, want 404", q, resp.Status)
			}
		}
	})

	t.Run("the administrator pages through the whole namespace once", func(t *testing.T) {
		root := browser(t)
		signIn(t, root, f.gateway.URL, "root", "root-pw")
		rows, _ := adminPages(t, root, f.gateway.URL, "/dashboard/admin?"+url.Values{"namespace": {f.ns}, "limit": {"2"}}.Encode())
		var list v1alpha1.UserlandList
		if err := f.server.Reader.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, ul := range list.Items {
			want = append(want, f.ns+"/"+ul.Name)
		}
		slices.Sort(want)
		if !slices.Equal(rows, want) {
			t.Errorf("the administrator's pages of %s: %v, want %v", f.ns, rows, want)
		}
		rows, _ = adminPages(t, root, f.gateway.URL, "/dashboard/admin?"+url.Values{"namespace": {f.ns}, "user": {"X"}}.Encode())
		if !slices.Equal(rows, []string{f.ns + "/x1", f.ns + "/x2", f.ns + "/x3"}) {
			t.Errorf("the administrator's user filter X: %v", rows)
		}
		feed, totals := statusPages(t, root, f.gateway.URL, "/dashboard/status?"+url.Values{"all": {"1"}, "namespace": {f.ns}, "limit": {"2"}}.Encode())
		if !slices.Equal(feed, want) || slices.ContainsFunc(totals, func(n string) bool { return n != strconv.Itoa(len(want)) }) {
			t.Errorf("the administrator's status feed of %s, 2 a page: %v (totals %v), want %v", f.ns, feed, totals, want)
		}
	})

	t.Run("the status feed of everything pages and filters as the admin page does", func(t *testing.T) {
		rows, _ := adminPages(t, bob, f.gateway.URL, "/dashboard/admin?"+url.Values{"namespace": {f.ns}}.Encode())
		feed, totals := statusPages(t, bob, f.gateway.URL, "/dashboard/status?"+url.Values{"all": {"1"}, "namespace": {f.ns}, "limit": {"1"}}.Encode())
		if !slices.Equal(feed, rows) || len(totals) != len(rows) {
			t.Errorf("bob's status feed of %s, a row a page: %v (totals %v); his admin page shows %v", f.ns, feed, totals, rows)
		}
		if feed, _ := statusPages(t, bob, f.gateway.URL, "/dashboard/status?"+url.Values{"all": {"1"}, "namespace": {hidden}}.Encode()); len(feed) != 0 {
			t.Errorf("HOLE: bob's status feed of %s, where he reaches nothing: %v", hidden, feed)
		}
		for _, q := range []string{"page=0", "limit=x", "phase=" + url.QueryEscape("<script>"), "user=" + strings.Repeat("a", 5000)} {
			if resp, body := get(t, bob, f.gateway.URL+"/dashboard/status?all=1&"+q, nil); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status feed ?all=1&%.40s: %s, want 400\n%.200s", q, resp.Status, body)
			}
		}
	})
}

// statusPages walks the status feed from u by its Link headers and
// returns every entry ("namespace/name") and each page's X-Total-Count.
func statusPages(t *testing.T, c *http.Client, gw, u string) (rows, totals []string) {
	t.Helper()
	for page := 0; u != ""; page++ {
		if page > 200 {
			t.Fatalf("more than 200 pages from %s", u)
		}
		resp, body := get(t, c, gw+u, map[string]string{"Accept": "application/json"})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", u, resp.Status)
		}
		var entries []struct{ Namespace, Name string }
		if err := json.Unmarshal([]byte(body), &entries); err != nil {
			t.Fatalf("%s: %v\n%.300s", u, err, body)
		}
		for _, e := range entries {
			rows = append(rows, e.Namespace+"/"+e.Name)
		}
		totals = append(totals, resp.Header.Get("X-Total-Count"))
		u = ""
		if link := resp.Header.Get("Link"); link != "" {
			next, ok := strings.CutSuffix(link, `>; rel="next"`)
			if !ok || !strings.HasPrefix(next, "</dashboard/status?") {
				t.Fatalf("%s: Link %q", u, link)
			}
			u = strings.TrimPrefix(next, "<")
		}
	}
	return rows, totals
}

// TestCourseRosterImportOf2000Students: a course manager's roster of
// 2,000 students (about 90 KiB) is imported through the course page, not
// cut off by the main host's 64 KiB bound on small forms.
func TestCourseRosterImportOf2000Students(t *testing.T) {
	t.Parallel()
	f := setupCourse(t)
	carol := browser(t)
	signIn(t, carol, f.gateway.URL, "carol", "carol-pw")
	bindCourseManager(t, f.ns, "idp:carol")
	var token string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var page string
		page, token = f.coursePage(t, carol)
		return strings.Contains(page, `name="roster"`), nil
	})
	if err != nil {
		t.Fatal("the upload never appeared for the course manager")
	}
	var csv strings.Builder
	csv.WriteString("user,role\n")
	for i := range 2000 {
		fmt.Fprintf(&csv, "roster-student%04d@uni.example.ac.jp,student\n", i)
	}
	resp, body := f.postCourse(t, carol, token, "import", csv.String())
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "2000 added") {
		t.Fatalf("importing %d bytes: %s\n%.500s", csv.Len(), resp.Status, body)
	}
	if n := len(f.liveCourse(t).Spec.Students.Users); n != 2001 {
		t.Errorf("the course lists %d students, want 2001", n)
	}
}
