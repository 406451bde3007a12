package course

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// TestOneBudgetPerStudentOfACourse: a student's environments made by one
// course share a budget; another student's, another course's (even of
// the same name, made again), a hand-set label's and the environment
// itself do not.
func TestOneBudgetPerStudentOfACourse(t *testing.T) {
	t.Parallel()
	c := &v1alpha1.Course{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "uid-db"},
		Spec: v1alpha1.CourseSpec{Students: v1alpha1.AutoProvisionSpec{Users: []string{"s@uni.example", "t@uni.example"}},
			Limits: v1alpha1.CourseLimits{Budget: &v1alpha1.BudgetSpec{Hours: 10}}}}
	again := &v1alpha1.Course{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "uid-db-2"}}
	lab := func(c *v1alpha1.Course, user, template string) *v1alpha1.Userland {
		ul := NewUserland(c, user, BasisStudentUser, v1alpha1.TemplateReference{Name: template})
		ul.Name = user[:1] + "-" + template
		return ul
	}
	editor := lab(c, "s@uni.example", "editor")
	labelOnly := lab(c, "s@uni.example", "notebook")
	delete(labelOnly.Annotations, v1alpha1.AnnotationProvisionedByCourse)
	otherNamespace := lab(c, "s@uni.example", "notebook")
	otherNamespace.Namespace = "elsewhere"
	cases := map[string]struct {
		other *v1alpha1.Userland
		want  bool
	}{
		"the student's database":                    {lab(c, "s@uni.example", "database"), true},
		"itself":                                    {editor, false},
		"another student's database":                {lab(c, "t@uni.example", "database"), false},
		"a course of the same name, made again":     {lab(again, "s@uni.example", "database"), false},
		"the course's label without its provenance": {labelOnly, false},
		"the same course name in another namespace": {otherNamespace, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SharesBudget(editor, tc.other); got != tc.want {
				t.Errorf("SharesBudget = %v, want %v", got, tc.want)
			}
			if got := SharesBudget(tc.other, editor); got != tc.want && tc.other != editor {
				t.Errorf("SharesBudget the other way = %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("sharers are those with usage", func(t *testing.T) {
		used := &v1alpha1.UsageStatus{UsedSeconds: 60}
		db := lab(c, "s@uni.example", "database")
		db.Status.Usage = used
		unbudgeted := lab(c, "s@uni.example", "notebook")
		own := editor.DeepCopy()
		own.Status.Usage = &v1alpha1.UsageStatus{UsedSeconds: 1}
		all := []v1alpha1.Userland{*own, *db, *unbudgeted, *lab(c, "t@uni.example", "database")}
		if diff := cmp.Diff([]*v1alpha1.UsageStatus{used}, NewBudgetSharing(Pointers(all), OneCourse(c)).Of(own)); diff != "" {
			t.Errorf("sharers (-want +got):\n%s", diff)
		}
		// The course deleted: each environment's budget is its own again.
		if got := NewBudgetSharing(Pointers(all), OneCourse(nil)).Of(own); len(got) != 0 {
			t.Errorf("sharers once the course is gone = %v, want none", got)
		}
		// Without a budget, or for staff, the course pools nothing.
		noBudget := c.DeepCopy()
		noBudget.Spec.Limits.Budget = nil
		if got := NewBudgetSharing(Pointers(all), OneCourse(noBudget)).Of(own); len(got) != 0 {
			t.Errorf("sharers under a course without a budget = %v, want none", got)
		}
		staffed := c.DeepCopy()
		staffed.Spec.Staff.Users = []string{"s@uni.example"}
		if got := NewBudgetSharing(Pointers(all), OneCourse(staffed)).Of(own); len(got) != 0 {
			t.Errorf("sharers of a member of staff = %v, want none", got)
		}
	})
}

// TestBudgetFor: the budget the controller enforces, and whose it is: the
// course's for its student, none for what the course made otherwise (its
// staff, a course without a budget), the template's outside a course,
// including under a deleted course's label or a namesake's.
func TestBudgetFor(t *testing.T) {
	t.Parallel()
	week := &v1alpha1.BudgetSpec{Hours: 10, Period: v1alpha1.BudgetWeek}
	term := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	c := &v1alpha1.Course{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "uid-db"},
		Spec: v1alpha1.CourseSpec{Students: v1alpha1.AutoProvisionSpec{Users: []string{"s@uni.example"}},
			Staff:  v1alpha1.CourseStaff{Users: []string{"ta@uni.example"}},
			Term:   v1alpha1.CourseTerm{Start: metav1.NewTime(term)},
			Limits: v1alpha1.CourseLimits{Budget: week}}}
	unbudgeted := c.DeepCopy()
	unbudgeted.Spec.Limits.Budget = nil
	namesake := c.DeepCopy()
	namesake.UID = "uid-db-2"
	tmpl := &v1alpha1.TemplateSpec{Budget: &v1alpha1.BudgetSpec{Hours: 3, Period: v1alpha1.BudgetWeek}}
	student := NewUserland(c, "s@uni.example", BasisStudentUser, v1alpha1.TemplateReference{Name: "lab"})
	staff := NewUserland(c, "ta@uni.example", BasisStaffUser, v1alpha1.TemplateReference{Name: "lab"})
	plain := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	type got struct {
		Spec      *v1alpha1.BudgetSpec
		TermStart time.Time
		OfCourse  bool
	}
	cases := map[string]struct {
		c    *v1alpha1.Course
		ul   *v1alpha1.Userland
		tmpl *v1alpha1.TemplateSpec
		want got
	}{
		"a course's student":                          {c, student, nil, got{week, term, true}},
		"the course's staff are exempt":               {c, staff, tmpl, got{}},
		"a course without a budget decides for it":    {unbudgeted, student, tmpl, got{}},
		"a deleted course's student: the template's":  {nil, student, tmpl, got{Spec: tmpl.Budget}},
		"a namesake course did not make it":           {namesake, student, tmpl, got{Spec: tmpl.Budget}},
		"outside a course":                            {nil, plain, tmpl, got{Spec: tmpl.Budget}},
		"outside a course, template unknown or plain": {nil, plain, nil, got{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec, start, ofCourse := BudgetFor(tc.c, tc.ul, tc.tmpl)
			if diff := cmp.Diff(tc.want, got{spec, start, ofCourse}); diff != "" {
				t.Errorf("BudgetFor (-want +got):\n%s", diff)
			}
		})
	}
}
