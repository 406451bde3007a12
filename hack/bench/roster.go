package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// rosterRows is the size of the roster the import is timed with.
const rosterRows = 500

// rosterRounds is how many imports are timed, each into a fresh course.
const rosterRounds = 5

// rosterResult is the cost of the gateway's authorization on a course
// roster import through the dashboard: the uploader's right to change
// the course is asked of the API server (a SubjectAccessReview) before
// the gateway writes for them.
type rosterResult struct {
	Rows int
	// Imports are the wall times of the imports, from POST to answer.
	Imports []time.Duration
	// Reviews are the SubjectAccessReviews the gateway asked in each
	// import, as the API server's audit log counted them.
	Reviews []int
	// ReviewServed are the API server's times for those reviews, from
	// receiving each request to completing it.
	ReviewServed []time.Duration
}

// MedianImport is the median import time.
func (r rosterResult) MedianImport() time.Duration { return medianDuration(r.Imports) }

// MedianReview is the median time the API server took for one review.
func (r rosterResult) MedianReview() time.Duration { return medianDuration(r.ReviewServed) }

// MaxReviews is the most reviews any one import asked.
func (r rosterResult) MaxReviews() int {
	n := 0
	for _, v := range r.Reviews {
		n = max(n, v)
	}
	return n
}

func medianDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

var rosterFormToken = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// benchRosterImport binds the bench user the course-manager role in the
// gateway's namespace, as an operator would bind a lecturer, then imports
// a roster of rosterRows students into rosterRounds fresh courses through
// the dashboard and counts, from the audit log, the reviews each import
// asked.
func benchRosterImport(ctx context.Context, c client.Client, gwAddr, mainHost, sessionCookie, auditLog string) (*rosterResult, error) {
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "bench-course-manager"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "userland-course-manager"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bench"}},
	}
	if err := c.Create(ctx, binding); err != nil {
		return nil, err
	}
	var csv strings.Builder
	csv.WriteString("user,role\n")
	for i := range rosterRows {
		fmt.Fprintf(&csv, "roster-student%03d@uni.example.ac.jp,student\n", i)
	}
	r := &rosterResult{Rows: rosterRows}
	hc := &http.Client{Timeout: time.Minute}
	for round := range rosterRounds {
		name := fmt.Sprintf("roster-%d", round)
		var err error
		if err = c.Create(ctx, testobj.MakeCourse("gw", name).Staff("bench").Template("app", v1alpha1.ProvisionOnSignIn).Obj()); err != nil {
			return nil, err
		}
		page := "http://" + gwAddr + "/dashboard/course?" + url.Values{"namespace": {"gw"}, "name": {name}}.Encode()
		// The gateway reads courses from its cache, which sees the new
		// one a moment after the API server does.
		var token string
		deadline := time.Now().Add(30 * time.Second)
		for token, err = rosterPageToken(hc, page, mainHost, sessionCookie); err != nil && time.Now().Before(deadline); token, err = rosterPageToken(hc, page, mainHost, sessionCookie) {
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for k, v := range map[string]string{"csrf": token, "namespace": "gw", "name": name, "action": "import"} {
			_ = mw.WriteField(k, v)
		}
		fw, _ := mw.CreateFormFile("roster", "roster.csv")
		_, _ = fw.Write([]byte(csv.String()))
		_ = mw.Close()
		req, _ := http.NewRequest(http.MethodPost, "http://"+gwAddr+"/dashboard/course", &buf)
		req.Host = mainHost
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Cookie", sessionCookie)
		req.Header.Set("Origin", "http://"+mainHost)
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		t1 := time.Now()
		if want := fmt.Sprintf("%d added", rosterRows); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			return nil, fmt.Errorf("roster import into %s: %s, no %q in\n%.500s", name, resp.Status, want, body)
		}
		time.Sleep(time.Second) // the audit entries of the import's last requests
		served, err := reviewsServed(auditLog, "bench-gateway", t0, t1.Add(time.Millisecond))
		if err != nil {
			return nil, err
		}
		r.Imports = append(r.Imports, t1.Sub(t0))
		r.Reviews = append(r.Reviews, len(served))
		r.ReviewServed = append(r.ReviewServed, served...)
		logf("  import %d: %d rows in %s, %d SubjectAccessReviews", round+1, rosterRows, ms(t1.Sub(t0)), len(served))
	}
	return r, nil
}

// rosterPageToken fetches the course page and returns its form token; the
// page offers the upload only to someone RBAC lets change the course.
func rosterPageToken(hc *http.Client, page, mainHost, sessionCookie string) (string, error) {
	req, _ := http.NewRequest(http.MethodGet, page, nil)
	req.Host = mainHost
	req.Header.Set("Cookie", sessionCookie)
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	m := rosterFormToken.FindSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil || !bytes.Contains(body, []byte(`name="roster"`)) {
		return "", fmt.Errorf("course page %s: %s, no upload offered:\n%.500s", page, resp.Status, body)
	}
	return string(m[1]), nil
}

// reviewsServed is the API server's serving time of each
// SubjectAccessReview the user created in [from, to).
func reviewsServed(auditLog, user string, from, to time.Time) ([]time.Duration, error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []time.Duration
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.User.Username != user || e.ObjectRef == nil {
			continue
		}
		if e.Verb != "create" || e.ObjectRef.Resource != "subjectaccessreviews" {
			continue
		}
		if e.StageTimestamp.Before(from) || !e.StageTimestamp.Before(to) {
			continue
		}
		out = append(out, e.StageTimestamp.Sub(e.RequestReceivedTimestamp))
	}
	return out, sc.Err()
}

// rosterRow is the Targets table's row for the import.
func rosterRow(p func(string, ...any), r *rosterResult) {
	p("| roster import of %d rows through the dashboard (course manager by RBAC) | 1 SubjectAccessReview, whatever the rows | %d per import (max of %d imports), each served in %s (median); the import takes %s (median) | — | — | %s |",
		r.Rows, r.MaxReviews(), len(r.Imports), ms(r.MedianReview()), ms(r.MedianImport()), verdict(r.MaxReviews() == 1 && minInt(r.Reviews) == 1))
}

func minInt(vs []int) int {
	if len(vs) == 0 {
		return 0
	}
	m := vs[0]
	for _, v := range vs[1:] {
		m = min(m, v)
	}
	return m
}
