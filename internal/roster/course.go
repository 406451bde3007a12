package roster

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// Roles a course roster's role column may name.
const (
	RoleStudent = "student"
	RoleStaff   = "staff"
)

// ColumnRole is the optional column of a course roster.
const ColumnRole = "role"

// CourseRow is one line of a course roster: a user and their role.
type CourseRow struct {
	// Line is the 1-based line number in the file.
	Line       int
	User, Role string
	// Problem is set when the line cannot be added.
	Problem string
}

// ParseCourse reads a course roster: the columns user and, optionally,
// role (student or staff; default student), in that order or as a header
// row names them. Blank lines and lines starting with # are skipped.
func ParseCourse(r io.Reader) ([]CourseRow, error) {
	rows, err := Parse(r, []string{ColumnUser, ColumnRole}, "")
	if err != nil {
		return nil, err
	}
	out := make([]CourseRow, 0, len(rows))
	for _, row := range rows {
		cr := CourseRow{Line: row.Line, User: row.User, Role: strings.ToLower(row.Role), Problem: row.Problem}
		if cr.Role == "" {
			cr.Role = RoleStudent
		}
		switch {
		case cr.Problem != "":
		case cr.User == "":
			cr.Problem = "no user"
		case len(cr.User) > 256:
			cr.Problem = "user is longer than 256 characters"
		case strings.ContainsFunc(cr.User, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			cr.Problem = "user contains control characters"
		case cr.Role != RoleStudent && cr.Role != RoleStaff:
			cr.Problem = fmt.Sprintf("role %q: want student or staff", cr.Role)
		}
		out = append(out, cr)
	}
	return out, nil
}

// AddToCourse adds each valid row's user to spec's students or staff,
// and reports each row as Created (added), Existing (listed already) or
// Rejected (Problem says why, or the user is listed in the other role).
func AddToCourse(spec *v1alpha1.CourseSpec, rows []CourseRow) []Result {
	results := make([]Result, 0, len(rows))
	for _, row := range rows {
		res := Result{Row: Row{Line: row.Line, User: row.User, Role: row.Role}}
		mine, other := &spec.Students.Users, &spec.Staff.Users
		if row.Role == RoleStaff {
			mine, other = other, mine
		}
		switch {
		case row.Problem != "":
			res.Outcome, res.Reason = Rejected, row.Problem
		case slices.Contains(*mine, row.User):
			res.Outcome = Existing
		case slices.Contains(*other, row.User):
			res.Outcome, res.Reason = Rejected, "listed in the course already in the other role"
		default:
			*mine = append(*mine, row.User)
			res.Outcome = Created
		}
		results = append(results, res)
	}
	return results
}
