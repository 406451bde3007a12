package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

// The pages scenario: pagesTotal Userlands, of which a course's
// pagesStudents, the rest spread over namespaces of pagesPerNamespace.
const (
	pagesPerNamespace = 200
	pagesCourseNS     = "pages-course"
	// pagesSamples are the timed requests of each page, after two
	// unmeasured ones.
	pagesSamples = 21
	// pagesImports are the roster imports timed, each into a fresh course.
	pagesImports = 3
	// pagesTarget is the bound on a page's render.
	pagesTarget = 200 * time.Millisecond
)

// pageTiming is one page, requested pagesSamples times one after another
// by an HTTP client against the real gateway process.
type pageTiming struct {
	Name, Who, Query string
	Median, P95, Max time.Duration
	Bytes            int
	// Rows is the count the page says match.
	Rows string
}

// pagesResult is the pages scenario.
type pagesResult struct {
	Userlands, Students int
	Pages               []pageTiming
	// Imports are the wall times of roster imports of Students rows.
	Imports []time.Duration
	// GatewayKiB is the gateway's resident set with everything cached.
	GatewayKiB int64
	// Profile is the top of the gateway's CPU profile while the admin
	// page is requested back to back.
	Profile string
}

// benchPages creates total Userlands (students of them a course's,
// every one with a status, as the controller would have written it) with
// no controller running, so the cluster holds the objects and nothing
// else; starts a gateway; and times its list pages as an administrator
// and as the course's teaching assistant, then a course roster import of
// students rows.
func benchPages(ctx context.Context, env *testenv.Environment, c client.Client, dir, bin string, total, students int) (*pagesResult, error) {
	r := &pagesResult{Userlands: total, Students: students}
	logf("pages: creating %d Userlands (a course of %d, the rest %d a namespace) with their status", total, students, pagesPerNamespace)
	t0 := time.Now()
	if err := namespace(ctx, c, pagesCourseNS); err != nil {
		return nil, err
	}
	crsObj := testobj.MakeCourse(pagesCourseNS, "big").Staff("ta").Template("app", v1alpha1.ProvisionOnSignIn)
	users := make([]string, students)
	for i := range users {
		users[i] = fmt.Sprintf("big-student%04d@uni.example.ac.jp", i)
	}
	crs := crsObj.Students(users...).Obj()
	if err := c.Create(ctx, benchTemplate(pagesCourseNS)); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, crs); err != nil {
		return nil, err
	}
	plain := total - students
	nss := (plain + pagesPerNamespace - 1) / pagesPerNamespace
	for i := range nss {
		ns := fmt.Sprintf("pages-%d", i)
		if err := namespace(ctx, c, ns); err != nil {
			return nil, err
		}
		if err := c.Create(ctx, benchTemplate(ns)); err != nil {
			return nil, err
		}
	}
	build := func(i int) *v1alpha1.Userland {
		if i < students {
			ul := course.NewUserland(crs, users[i], course.BasisStudentUser, v1alpha1.TemplateReference{Name: "app"})
			ul.Name = fmt.Sprintf("s-%d", i)
			return ul
		}
		j := i - students
		return benchUserland(fmt.Sprintf("pages-%d", j/pagesPerNamespace), j)
	}
	err := eachParallel(total, func(i int) error {
		ul := build(i)
		if err := c.Create(ctx, ul); err != nil {
			return fmt.Errorf("creating Userland %s/%s: %w", ul.Namespace, ul.Name, err)
		}
		// A status as the controller leaves it: a third Ready, a third
		// idle-stopped, a third not started; used some minutes ago.
		before := ul.DeepCopy()
		used := metav1.NewTime(time.Now().Add(-time.Duration(i%600) * time.Minute))
		ul.Status.LastActivityTime = &used
		switch i % 3 {
		case 0:
			ul.Status.Phase = v1alpha1.PhaseReady
		case 1:
			ul.Status.Phase, ul.Status.StoppedReason = v1alpha1.PhaseStopped, v1alpha1.StoppedIdle
		default:
			ul.Status.Phase, ul.Status.StoppedReason = v1alpha1.PhaseStopped, v1alpha1.StoppedNotStarted
		}
		return c.Status().Patch(ctx, ul, client.MergeFrom(before))
	})
	if err != nil {
		return nil, err
	}
	logf("pages: created in %s", time.Since(t0).Round(time.Second))
	// The course manager role lets the assistant import a roster.
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pagesCourseNS, Name: "ta-course-manager"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-course-manager"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ta"}},
	}
	if err := c.Create(ctx, binding); err != nil {
		return nil, err
	}

	gw, err := newBenchGateway(ctx, env, dir, bin, "127.0.0.1:9")
	if err != nil {
		return nil, err
	}
	if err := pagesUsers(dir); err != nil {
		return nil, err
	}
	gw.args = append(gw.args, "--admin-groups=admins")
	proc, gwAddr, err := gw.start()
	if err != nil {
		return nil, err
	}
	defer proc.stop()
	_, port, _ := strings.Cut(gwAddr, ":")
	mainHost := benchMainHost + ":" + port
	pc := &pageClient{hc: &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		addr: gwAddr, host: mainHost, cookies: map[string]string{}}
	for _, u := range []string{"admin", "ta"} {
		if err := pc.signIn(u); err != nil {
			return nil, err
		}
	}
	// The gateway's cache fills from its informers after it is ready.
	// The assistant's sign-in gave them an environment of their own (the
	// course provisions its staff too): at least total, then.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		_, body, _, err := pc.get("admin", "/dashboard/admin")
		var n int
		if _, rest, ok := strings.Cut(body, `<h2 id="all">Environments (`); ok && err == nil {
			n, _ = strconv.Atoi(strings.SplitN(rest, ")", 2)[0])
		}
		if n >= total {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the admin page never counted %d environments", total)
		}
		time.Sleep(time.Second)
	}
	coursePath := "/dashboard/course?" + url.Values{"namespace": {pagesCourseNS}, "name": {"big"}}.Encode()
	for _, pg := range []pageTiming{
		{Name: "all environments, first page", Who: "admin", Query: "/dashboard/admin"},
		// A page past the end is the last one.
		{Name: "all environments, last page", Who: "admin", Query: "/dashboard/admin?page=999999"},
		{Name: "all environments, filtered by phase and user", Who: "admin", Query: "/dashboard/admin?phase=Ready&user=student1"},
		{Name: "all environments, one namespace", Who: "admin", Query: "/dashboard/admin?namespace=pages-7"},
		{Name: "all environments, 500 rows (the largest limit)", Who: "admin", Query: "/dashboard/admin?limit=500"},
		{Name: "all environments as the course's assistant", Who: "ta", Query: "/dashboard/admin"},
		{Name: "course page, first page", Who: "ta", Query: coursePath},
		{Name: "course page, filtered by phase and user", Who: "ta", Query: coursePath + "&phase=Ready&user=student1"},
		{Name: "course page, last page", Who: "ta", Query: coursePath + "&page=999999"},
		{Name: "course page as an administrator", Who: "admin", Query: coursePath},
	} {
		if err := pc.time(&pg); err != nil {
			return nil, err
		}
		logf("  %s (%s): median %s, p95 %s, %d bytes, %s rows", pg.Name, pg.Who, ms(pg.Median), ms(pg.P95), pg.Bytes, pg.Rows)
		r.Pages = append(r.Pages, pg)
	}
	_, r.GatewayKiB = memory(proc.cmd.Process.Pid)
	profile := make(chan string, 1)
	go func() {
		profile <- cpuProfile(http.DefaultClient, "http://"+gw.pprof, filepath.Join(dir, "gateway-pages.pprof"), 10*time.Second)
	}()
	for end := time.Now().Add(11 * time.Second); time.Now().Before(end); {
		_, _, _, _ = pc.get("admin", "/dashboard/admin")
	}
	r.Profile = <-profile
	logf("pages: %d roster imports of %d rows", pagesImports, students)
	if r.Imports, err = pc.imports(ctx, c, students); err != nil {
		return nil, err
	}
	return r, nil
}

// pagesUsers writes the gateway's users: an administrator and the
// course's assistant (staff, no group).
func pagesUsers(dir string) error {
	hash, _ := bcrypt.GenerateFromPassword([]byte("bench-pw"), bcrypt.MinCost)
	users := "users:\n"
	for _, u := range []struct{ name, groups string }{{"admin", "[admins]"}, {"ta", "[]"}} {
		users += fmt.Sprintf("  - name: %s\n    passwordHash: %q\n    groups: %s\n", u.name, hash, u.groups)
	}
	return os.WriteFile(filepath.Join(dir, "users.yaml"), []byte(users), 0o600)
}

// pageClient requests pages as signed-in users.
type pageClient struct {
	hc         *http.Client
	addr, host string
	cookies    map[string]string
}

func (pc *pageClient) signIn(user string) error {
	req, _ := http.NewRequest(http.MethodPost, "http://"+pc.addr+"/login",
		strings.NewReader(url.Values{"username": {user}, "password": {"bench-pw"}, "rd": {"/"}}.Encode()))
	req.Host = pc.host
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := pc.hc.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == "userland_session" {
			pc.cookies[user] = ck.Name + "=" + ck.Value
			return nil
		}
	}
	return fmt.Errorf("signing %s in: %s, no session", user, resp.Status)
}

// get fetches a page whole and times it from request to last byte.
func (pc *pageClient) get(user, path string) (int, string, time.Duration, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+pc.addr+path, nil)
	req.Host = pc.host
	req.Header.Set("Cookie", pc.cookies[user])
	t0 := time.Now()
	resp, err := pc.hc.Do(req)
	if err != nil {
		return 0, "", 0, err
	}
	body, err := io.ReadAll(resp.Body)
	took := time.Since(t0)
	_ = resp.Body.Close()
	return resp.StatusCode, string(body), took, err
}

func (pc *pageClient) time(pg *pageTiming) error {
	var took []time.Duration
	for i := range pagesSamples + 2 {
		code, body, d, err := pc.get(pg.Who, pg.Query)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%s", http.StatusText(code))
		}
		if err != nil {
			return fmt.Errorf("%s as %s: %w", pg.Query, pg.Who, err)
		}
		pg.Bytes, pg.Rows = len(body), pageCount(body)
		if i >= 2 {
			took = append(took, d)
		}
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	pg.Median, pg.P95, pg.Max = took[len(took)/2], took[(len(took)*95+99)/100-1], took[len(took)-1]
	return nil
}

// pageCount is what a list page says it counts ("Showing 1–100 of
// 10000").
func pageCount(body string) string {
	_, rest, ok := strings.Cut(body, "Showing ")
	if !ok {
		return "0"
	}
	line, _, _ := strings.Cut(rest, "<")
	return strings.TrimSpace(line)
}

// eachParallel runs fn for 0..n-1, parallelism at a time, and returns
// the first error.
func eachParallel(n int, fn func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range parallelism {
		wg.Go(func() {
			for i := range work {
				if err := fn(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// imports times roster uploads of rows students through the course
// page, as the assistant (course manager by RBAC), each into a fresh
// course.
func (pc *pageClient) imports(ctx context.Context, c client.Client, rows int) ([]time.Duration, error) {
	var csv strings.Builder
	csv.WriteString("user,role\n")
	for i := range rows {
		fmt.Fprintf(&csv, "import-student%04d@uni.example.ac.jp,student\n", i)
	}
	var out []time.Duration
	for round := range pagesImports {
		name := fmt.Sprintf("import-%d", round)
		if err := c.Create(ctx, testobj.MakeCourse(pagesCourseNS, name).Staff("ta").Template("app", v1alpha1.ProvisionOnSignIn).Obj()); err != nil {
			return nil, err
		}
		page := "http://" + pc.addr + "/dashboard/course?" + url.Values{"namespace": {pagesCourseNS}, "name": {name}}.Encode()
		var token string
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if token, err = rosterPageToken(pc.hc, page, pc.host, pc.cookies["ta"]); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for k, v := range map[string]string{"csrf": token, "namespace": pagesCourseNS, "name": name, "action": "import"} {
			_ = mw.WriteField(k, v)
		}
		fw, _ := mw.CreateFormFile("roster", "roster.csv")
		_, _ = fw.Write([]byte(csv.String()))
		_ = mw.Close()
		req, _ := http.NewRequest(http.MethodPost, "http://"+pc.addr+"/dashboard/course", &buf)
		req.Host = pc.host
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Cookie", pc.cookies["ta"])
		req.Header.Set("Origin", "http://"+pc.host)
		t0 := time.Now()
		resp, err := pc.hc.Do(req)
		if err != nil {
			return nil, err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		took := time.Since(t0)
		if want := fmt.Sprintf("%d added", rows); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			return nil, fmt.Errorf("roster import into %s: %s, no %q in\n%.500s", name, resp.Status, want, body)
		}
		logf("  import %d: %d rows in %s", round+1, rows, ms(took))
		out = append(out, took)
	}
	return out, nil
}

// pagesSection reports the scenario.
func pagesSection(p func(string, ...any), r *pagesResult) {
	p("## Pages at %d", r.Userlands)
	p("")
	p("%d Userlands with a status each (a third Ready, a third idle-stopped, a third not started): a course of %d students in one namespace, the rest %d a namespace. No controller runs, so the cluster holds only these objects. One gateway process (`bin/userland gateway`, its informer cache) serves the pages to an HTTP client on the same machine, which signs in as an administrator (every environment) and as the course's teaching assistant (staff of the course, bound the course-manager role; reaches the course's %d student environments). Each page is fetched %d times one after another, after two unmeasured fetches; the time is from the request to the last byte. Pages show %d rows unless `limit` asks for more (at most %d).",
		r.Userlands, r.Students, pagesPerNamespace, r.Students, pagesSamples, 100, 500)
	p("")
	p("| page | viewer | rows shown of matching | median | p95 | max | HTML bytes | verdict (p95 ≤ %s) |", ms(pagesTarget))
	p("|---|---|---|---|---|---|---|---|")
	for _, pg := range r.Pages {
		p("| %s (`%s`) | %s | %s | %s | %s | %s | %d | %s |", pg.Name, pg.Query, pg.Who, pg.Rows, ms(pg.Median), ms(pg.P95), ms(pg.Max), pg.Bytes, verdict(pg.P95 <= pagesTarget))
	}
	p("")
	var imports []string
	for _, d := range r.Imports {
		imports = append(imports, ms(d))
	}
	p("- Course roster import (CSV upload on the course page) of %d rows into a fresh course, as the assistant: %s (median of %s).", r.Students, ms(medianDuration(r.Imports)), strings.Join(imports, ", "))
	p("- Gateway peak RSS with %d Userlands and %d courses cached, after the pages: %.1f MiB.", r.Userlands, 1+pagesImports, float64(r.GatewayKiB)/1024)
	p("")
	p("The gateway's CPU profile while the first admin page is requested back to back for 10 s:")
	p("")
	p("```")
	p("%s", r.Profile)
	p("```")
	p("")
}

// pagesTargets are the Targets table's rows: the slowest of each page
// kind, and the import.
func pagesTargets(p func(string, ...any), r *pagesResult) {
	if r == nil {
		return
	}
	for _, kind := range []struct{ prefix, what string }{
		{"all environments", fmt.Sprintf("the admin's All environments page at %d Userlands", r.Userlands)},
		{"course page", fmt.Sprintf("a course page of %d students", r.Students)},
	} {
		var worst pageTiming
		for _, pg := range r.Pages {
			if strings.HasPrefix(pg.Name, kind.prefix) && pg.P95 >= worst.P95 {
				worst = pg
			}
		}
		p("| %s, server-side pages and filters (slowest of its pages below: %s) | ≤ %s | p95 %s, median %s, %d bytes of HTML | — | — | %s |",
			kind.what, worst.Name, ms(pagesTarget), ms(worst.P95), ms(worst.Median), worst.Bytes, verdict(worst.P95 <= pagesTarget))
	}
	p("| course roster import of %d rows (CSV upload on the course page) | no target set | %s (median of %d) | — | — | — |", r.Students, ms(medianDuration(r.Imports)), len(r.Imports))
}

// deletePagesNamespaces removes the scenario's namespaces and waits
// until they are gone.
func deletePagesNamespaces(ctx context.Context, c client.Client) error {
	var list corev1.NamespaceList
	if err := c.List(ctx, &list); err != nil {
		return err
	}
	for _, ns := range list.Items {
		if ns.Name == pagesCourseNS || strings.HasPrefix(ns.Name, "pages-") {
			if _, err := deleteNamespace(ctx, c, ns.Name); err != nil {
				return err
			}
		}
	}
	return nil
}
