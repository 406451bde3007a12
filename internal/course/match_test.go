package course

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/userland-dev/userland/internal/identity"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestMatch: the role a signed-in identity has on a roster and the entry
// that gave it. Staff wins over student; an empty user, an empty group
// and an address's domain in another case are handled as the roster
// means them.
func TestMatch(t *testing.T) {
	t.Parallel()
	c := testobj.MakeCourse("ns", "db").Students("s@uni.example").StudentGroups("db-students").
		Staff("ta@uni.example").StaffGroups("db-tas").Obj()
	c.Spec.Students.EmailDomains = []string{"students.uni.example"}
	type verdict struct {
		Role  Role
		Basis string
		Staff bool
	}
	cases := map[string]struct {
		id   identity.Identity
		want verdict
	}{
		"listed staff":                {identity.Identity{User: "ta@uni.example"}, verdict{Staff, BasisStaffUser, true}},
		"staff by group":              {identity.Identity{User: "x", Groups: []string{"other", "db-tas"}}, verdict{Staff, BasisStaffGroup + "db-tas", true}},
		"staff wins over student":     {identity.Identity{User: "s@uni.example", Groups: []string{"db-tas"}}, verdict{Staff, BasisStaffGroup + "db-tas", true}},
		"listed student":              {identity.Identity{User: "s@uni.example"}, verdict{Student, BasisStudentUser, false}},
		"student by group":            {identity.Identity{User: "g", Groups: []string{"db-students"}}, verdict{Student, BasisStudentGroup + "db-students", false}},
		"student by e-mail domain":    {identity.Identity{User: "d", Email: "d@Students.Uni.Example"}, verdict{Student, BasisStudentDomain + "students.uni.example", false}},
		"a subdomain is not on it":    {identity.Identity{User: "d", Email: "d@x.students.uni.example"}, verdict{}},
		"not listed":                  {identity.Identity{User: "mallory", Email: "m@elsewhere.example"}, verdict{}},
		"no user is nobody":           {identity.Identity{Groups: []string{"db-tas"}}, verdict{}},
		"an empty group matches not":  {identity.Identity{User: "e", Groups: []string{""}}, verdict{}},
		"the display name is not who": {identity.Identity{User: "z", Name: "ta@uni.example"}, verdict{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			role, basis := Match(c, tc.id)
			got := verdict{role, basis, IsStaff(c, tc.id)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Match (-want +got):\n%s", diff)
			}
		})
	}
}
