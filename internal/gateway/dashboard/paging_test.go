package dashboard

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// TestPaging: page and limit default, cap and refuse; nothing a URL says
// makes a page longer than MaxLimit or a parse fail other than cleanly.
func TestPaging(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		query       string
		page, limit int
		refused     bool
	}{
		"defaults":            {query: "", page: 1, limit: DefaultLimit},
		"a page":              {query: "page=3", page: 3, limit: DefaultLimit},
		"a huge page":         {query: "page=999999999", page: 999999999, limit: DefaultLimit},
		"a limit":             {query: "limit=20", page: 1, limit: 20},
		"a huge limit capped": {query: "limit=1000000000", page: 1, limit: MaxLimit},
		"page zero":           {query: "page=0", refused: true},
		"a negative page":     {query: "page=-1", refused: true},
		"a page too big":      {query: "page=99999999999999999999999", refused: true},
		"a word":              {query: "page=two", refused: true},
		"a fraction":          {query: "page=1.5", refused: true},
		"a zero limit":        {query: "limit=0", refused: true},
		"a negative limit":    {query: "limit=-5", refused: true},
		"a limit not numeric": {query: "limit=all", refused: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			q, _ := url.ParseQuery(tc.query)
			page, limit, err := paging(q)
			if tc.refused {
				if !isQueryError(err) {
					t.Fatalf("paging(%q) = %d, %d, %v; want a refused query", tc.query, page, limit, err)
				}
				return
			}
			if err != nil || page != tc.page || limit != tc.limit {
				t.Errorf("paging(%q) = %d, %d, %v; want %d, %d", tc.query, page, limit, err, tc.page, tc.limit)
			}
		})
	}
}

// TestPaginate: the window, the clamp past the end and the links, which
// keep the filters and drop the default limit.
func TestPaginate(t *testing.T) {
	t.Parallel()
	filters := url.Values{"phase": {"Ready"}, "user": {"a b"}}
	cases := map[string]struct {
		total, page, limit int
		want               Pager
		lo, hi             int
	}{
		"nothing":                        {total: 0, page: 1, limit: 100, want: Pager{Page: 1, Pages: 1}},
		"nothing, a page past it clamps": {total: 0, page: 7, limit: 100, want: Pager{Page: 1, Pages: 1}},
		"one page": {total: 3, page: 1, limit: 100, lo: 0, hi: 3,
			want: Pager{Page: 1, Pages: 1, Total: 3, From: 1, To: 3}},
		"first of three": {total: 250, page: 1, limit: 100, lo: 0, hi: 100,
			want: Pager{Page: 1, Pages: 3, Total: 250, From: 1, To: 100,
				Next: "/p?page=2&phase=Ready&user=a+b", Last: "/p?page=3&phase=Ready&user=a+b",
				Near: []PageLink{{1, "/p?phase=Ready&user=a+b", true}, {2, "/p?page=2&phase=Ready&user=a+b", false}, {3, "/p?page=3&phase=Ready&user=a+b", false}}}},
		"the last, partly full": {total: 250, page: 3, limit: 100, lo: 200, hi: 250,
			want: Pager{Page: 3, Pages: 3, Total: 250, From: 201, To: 250,
				First: "/p?phase=Ready&user=a+b", Prev: "/p?page=2&phase=Ready&user=a+b",
				Near: []PageLink{{1, "/p?phase=Ready&user=a+b", false}, {2, "/p?page=2&phase=Ready&user=a+b", false}, {3, "/p?page=3&phase=Ready&user=a+b", true}}}},
		"past the end clamps to the last": {total: 250, page: 999999999, limit: 100, lo: 200, hi: 250,
			want: Pager{Page: 3, Pages: 3, Total: 250, From: 201, To: 250,
				First: "/p?phase=Ready&user=a+b", Prev: "/p?page=2&phase=Ready&user=a+b",
				Near: []PageLink{{1, "/p?phase=Ready&user=a+b", false}, {2, "/p?page=2&phase=Ready&user=a+b", false}, {3, "/p?page=3&phase=Ready&user=a+b", true}}}},
		"a limit not the default is kept": {total: 3, page: 2, limit: 2, lo: 2, hi: 3,
			want: Pager{Page: 2, Pages: 2, Total: 3, From: 3, To: 3,
				First: "/p?limit=2&phase=Ready&user=a+b", Prev: "/p?limit=2&phase=Ready&user=a+b",
				Near: []PageLink{{1, "/p?limit=2&phase=Ready&user=a+b", false}, {2, "/p?limit=2&page=2&phase=Ready&user=a+b", true}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, lo, hi := paginate("/p", filters, tc.total, tc.page, tc.limit)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pager (-want +got):\n%s", diff)
			}
			if lo != tc.lo || hi != tc.hi {
				t.Errorf("rows [%d, %d), want [%d, %d)", lo, hi, tc.lo, tc.hi)
			}
		})
	}
}

// TestPaginateShowsAFewPagesAround: ten thousand rows at the smallest
// limit still give seven numbered links, not ten thousand.
func TestPaginateShowsAFewPagesAround(t *testing.T) {
	t.Parallel()
	p, lo, hi := paginate("/p", nil, 10000, 5000, 1)
	if len(p.Near) != 2*nearPages+1 || p.Near[0].N != 4997 || p.Near[len(p.Near)-1].N != 5003 || lo != 4999 || hi != 5000 {
		t.Errorf("page 5000 of 10000: near %+v, rows [%d, %d)", p.Near, lo, hi)
	}
}

// TestAdminFilter: every filter is read, bounded and refused cleanly.
func TestAdminFilter(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", maxFilterLen+1)
	cases := map[string]struct {
		query   string
		want    Filter
		refused bool
	}{
		"none":            {query: ""},
		"all of them":     {query: "namespace=cs&template=lab&course=db&phase=Ready&user=Ann&idle=30", want: Filter{Namespace: "cs", Template: "lab", Course: "db", Phase: "Ready", User: "Ann", IdleMinutes: 30}},
		"a huge idle":     {query: "idle=9223372036854775807", want: Filter{IdleMinutes: maxIdleMinutes}},
		"an unknown one":  {query: "phase=Sleeping", refused: true},
		"a negative idle": {query: "idle=-3", refused: true},
		"a wordy idle":    {query: "idle=long", refused: true},
		"a long user":     {query: "user=" + long, refused: true},
		"a long course":   {query: "course=" + long, refused: true},
		"a long ns":       {query: "namespace=" + long, refused: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			q, _ := url.ParseQuery(tc.query)
			got, err := adminFilter(q)
			if tc.refused {
				if !isQueryError(err) {
					t.Fatalf("adminFilter(%q) = %+v, %v; want a refused query", tc.query, got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFilterKeep: what each admin filter keeps.
func TestFilterKeep(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ul := &v1alpha1.Userland{
		ObjectMeta: metav1.ObjectMeta{Namespace: "cs", Name: "ann-lab", Labels: map[string]string{v1alpha1.LabelCourse: "db"},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec: v1alpha1.UserlandSpec{User: "Ann@uni.example", TemplateRef: v1alpha1.TemplateReference{Name: "lab"}},
	}
	cases := map[string]struct {
		f    Filter
		want bool
	}{
		"nothing":                       {Filter{}, true},
		"its namespace":                 {Filter{Namespace: "cs"}, true},
		"another namespace":             {Filter{Namespace: "ee"}, false},
		"its course":                    {Filter{Course: "db"}, true},
		"another course":                {Filter{Course: "os"}, false},
		"Pending before any status":     {Filter{Phase: "Pending"}, true},
		"Ready":                         {Filter{Phase: "Ready"}, false},
		"part of its user, any case":    {Filter{User: "ann@"}, true},
		"another user":                  {Filter{User: "bob"}, false},
		"idle for less than it has":     {Filter{IdleMinutes: 30}, true},
		"idle for more than it has":     {Filter{IdleMinutes: 90}, false},
		"idle as long as can be parsed": {Filter{IdleMinutes: maxIdleMinutes}, false},
		"all that fit":                  {Filter{Namespace: "cs", Course: "db", Template: "lab", User: "ANN", Phase: "Pending"}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := tc.f.keep(ul, now, strings.ToLower(tc.f.User)); got != tc.want {
				t.Errorf("%+v keeps it: %v, want %v", tc.f, got, tc.want)
			}
		})
	}
}

// TestCourseFilterKeep: the course page's filters on a member, who keeps
// only the environments in the phase asked for.
func TestCourseFilterKeep(t *testing.T) {
	t.Parallel()
	ready, stopped := Row{Name: "a", State: "Ready"}, Row{Name: "b", State: "Stopped", Phase: "Queued"}
	ann := CourseMember{User: "ann@uni.example", Rows: []Row{ready, stopped}}
	nobody := CourseMember{User: "bo@uni.example"}
	cases := map[string]struct {
		f    CourseFilter
		m    CourseMember
		want bool
		rows []Row
	}{
		"nothing":                     {CourseFilter{}, ann, true, ann.Rows},
		"a phase keeps its rows only": {CourseFilter{Phase: "Stopped"}, ann, true, []Row{stopped}},
		"a phase it has none in":      {CourseFilter{Phase: "Failed"}, ann, false, nil},
		"no environment, with some":   {CourseFilter{Phase: NoEnvironment}, ann, false, ann.Rows},
		"no environment, with none":   {CourseFilter{Phase: NoEnvironment}, nobody, true, nil},
		"part of the user":            {CourseFilter{User: "ANN"}, ann, true, ann.Rows},
		"another user":                {CourseFilter{User: "carol"}, ann, false, ann.Rows},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, ok := tc.f.keep(tc.m, strings.ToLower(tc.f.User))
			if ok != tc.want {
				t.Fatalf("%+v keeps %s: %v, want %v", tc.f, tc.m.User, ok, tc.want)
			}
			if diff := cmp.Diff(tc.rows, got.Rows); ok && diff != "" {
				t.Errorf("rows kept (-want +got):\n%s", diff)
			}
		})
	}
}
