package roster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/userland-dev/userland/api/v1alpha1"
)

func TestAddToCourse(t *testing.T) {
	t.Parallel()
	const csv = `user,role
a@uni.example
b@uni.example,staff
a@uni.example,student
c@uni.example,staff
d@uni.example,auditor
,student
`
	rows, err := ParseCourse(strings.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	spec := &v1alpha1.CourseSpec{}
	spec.Students.Users = []string{"c@uni.example"}
	results := AddToCourse(spec, rows)
	type got struct {
		Line    int
		User    string
		Outcome Outcome
		Reason  string
	}
	var gotRows []got
	for _, r := range results {
		gotRows = append(gotRows, got{r.Line, r.User, r.Outcome, r.Reason})
	}
	want := []got{
		{2, "a@uni.example", Created, ""},
		{3, "b@uni.example", Created, ""},
		{4, "a@uni.example", Existing, ""},
		{5, "c@uni.example", Rejected, "listed in the course already in the other role"},
		{6, "d@uni.example", Rejected, `role "auditor": want student or staff`},
		{7, "", Rejected, "no user"},
	}
	if diff := cmp.Diff(want, gotRows); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"c@uni.example", "a@uni.example"}, spec.Students.Users); diff != "" {
		t.Errorf("students (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b@uni.example"}, spec.Staff.Users); diff != "" {
		t.Errorf("staff (-want +got):\n%s", diff)
	}
}
