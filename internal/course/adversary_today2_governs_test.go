package course

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// What the course page's grant form admits (BudgetGoverns) for the
// environments a TA or course manager might name.
func TestAdversaryToday2BudgetGovernsOnlyItsOwn(t *testing.T) {
	mk := func(ns, name, uid string, budget bool) *v1alpha1.Course {
		c := &v1alpha1.Course{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: k8stypes.UID("u-" + uid)}}
		c.Spec.Students.Users = []string{"alice"}
		c.Spec.Students.Groups = []string{"g"}
		c.Spec.Staff.Users = []string{"carol"}
		c.Spec.Staff.Groups = []string{"tas"}
		if budget {
			c.Spec.Limits.Budget = &v1alpha1.BudgetSpec{Hours: 10}
		}
		return c
	}
	db := mk("ns", "db", "db1", true)
	env := func(ns, label, prov, user, basis string) *v1alpha1.Userland {
		ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e",
			Labels: map[string]string{}, Annotations: map[string]string{}}}
		if label != "" {
			ul.Labels[v1alpha1.LabelCourse] = label
		}
		if prov != "" {
			ul.Annotations[v1alpha1.AnnotationProvisionedByCourse] = prov
		}
		if basis != "" {
			ul.Annotations[v1alpha1.AnnotationEnrolledBy] = basis
		}
		ul.Spec.User = user
		return ul
	}
	for _, tc := range []struct {
		name string
		c    *v1alpha1.Course
		ul   *v1alpha1.Userland
		want bool
	}{
		{"control: db's student", db, env("ns", "db", "u-db1", "alice", BasisStudentUser), true},
		{"another course's (os) student", db, env("ns", "os", "u-os1", "alice", BasisStudentUser), false},
		{"label edited to db, provenance os", db, env("ns", "db", "u-os1", "alice", BasisStudentUser), false},
		{"namesake: an earlier db's (other UID)", db, env("ns", "db", "u-db0", "alice", BasisStudentUser), false},
		{"other namespace, same name and UID", db, env("other", "db", "u-db1", "alice", BasisStudentUser), false},
		{"outside any course", db, env("ns", "", "", "alice", ""), false},
		{"provenance without label", db, env("ns", "", "u-db1", "alice", BasisStudentUser), false},
		{"staff user", db, env("ns", "db", "u-db1", "carol", BasisStudentUser), false},
		{"staff group basis, also a student user", db, env("ns", "db", "u-db1", "alice", BasisStaffGroup+"tas"), false},
		{"not on the roster", db, env("ns", "db", "u-db1", "mallory", BasisStudentUser), false},
		{"student group not in the roster", db, env("ns", "db", "u-db1", "mallory", BasisStudentGroup+"other"), false},
		{"course without a budget", mk("ns", "db", "db1", false), env("ns", "db", "u-db1", "alice", BasisStudentUser), false},
		{"course with no UID (not from the API)", &v1alpha1.Course{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
			Spec: db.Spec}, env("ns", "db", "", "alice", BasisStudentUser), false},
		{"nil course", nil, env("ns", "db", "u-db1", "alice", BasisStudentUser), false},
	} {
		if got := BudgetGoverns(tc.c, tc.ul); got != tc.want {
			t.Errorf("%s: BudgetGoverns = %v, want %v", tc.name, got, tc.want)
		}
	}
}
