package course

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// TestWhatStaffReachAndRetirementDeletes: only environments the course
// made for its students are the staff's to reach and the course's to
// delete; a label alone (set by hand, or by an earlier version's adoption),
// another course of the same name, or staff's own environment is not.
func TestWhatStaffReachAndRetirementDeletes(t *testing.T) {
	t.Parallel()
	c := &v1alpha1.Course{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "uid-db"},
		Spec: v1alpha1.CourseSpec{
			Students: v1alpha1.AutoProvisionSpec{Users: []string{"s@uni.example"}, Groups: []string{"db-students"}},
			Staff:    v1alpha1.CourseStaff{Users: []string{"ta@uni.example"}},
		},
	}
	made := func(user, basis string) *v1alpha1.Userland {
		return NewUserland(c, user, basis, v1alpha1.TemplateReference{Name: "lab"})
	}
	with := func(ul *v1alpha1.Userland, edit func(*v1alpha1.Userland)) *v1alpha1.Userland {
		edit(ul)
		return ul
	}
	type verdict struct{ Reach, Retire bool }
	cases := map[string]struct {
		ul   *v1alpha1.Userland
		want verdict
	}{
		"made for a listed student":         {made("s@uni.example", BasisStudentUser), verdict{true, true}},
		"made for a group's student":        {made("g@uni.example", BasisStudentGroup+"db-students"), verdict{true, true}},
		"made for a student who left":       {made("gone@uni.example", BasisStudentUser), verdict{false, true}},
		"made for staff":                    {made("ta@uni.example", BasisStaffUser), verdict{false, false}},
		"made for a student now staff":      {made("ta@uni.example", BasisStudentUser), verdict{false, false}},
		"label only (adopted, or set)":      {with(made("s@uni.example", BasisStudentUser), func(u *v1alpha1.Userland) { delete(u.Annotations, v1alpha1.AnnotationProvisionedByCourse) }), verdict{}},
		"made by an earlier course db":      {with(made("s@uni.example", BasisStudentUser), func(u *v1alpha1.Userland) { u.Annotations[v1alpha1.AnnotationProvisionedByCourse] = "uid-old" }), verdict{}},
		"made by db but labelled for other": {with(made("s@uni.example", BasisStudentUser), func(u *v1alpha1.Userland) { u.Labels[v1alpha1.LabelCourse] = "other" }), verdict{}},
		"in another namespace":              {with(made("s@uni.example", BasisStudentUser), func(u *v1alpha1.Userland) { u.Namespace = "elsewhere" }), verdict{}},
		"no enrolment basis":                {with(made("s@uni.example", ""), func(*v1alpha1.Userland) {}), verdict{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := verdict{StaffMayReach(c, tc.ul), Retires(c, tc.ul)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// A Course not yet stored has no UID: nothing is its.
	unsaved := c.DeepCopy()
	unsaved.UID = ""
	if ul := NewUserland(unsaved, "s@uni.example", BasisStudentUser, v1alpha1.TemplateReference{Name: "lab"}); Provisioned(unsaved, ul) {
		t.Error("a course without a UID claims an environment")
	}
}

func TestIsUserlandClaim(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		meta metav1.ObjectMeta
		want bool
	}{
		"course material": {metav1.ObjectMeta{Name: "material"}, false},
		"a home claim":    {metav1.ObjectMeta{Name: "alice-lab-home", Labels: map[string]string{v1alpha1.LabelUserland: "alice-lab"}}, true},
		"owned by a Userland, label removed": {metav1.ObjectMeta{Name: "x", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "userland.dev/v1alpha1", Kind: "Userland", Name: "alice-lab", UID: "u"}}}, true},
		"owned by something else": {metav1.ObjectMeta{Name: "x", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "u"}}}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := IsUserlandClaim(&corev1.PersistentVolumeClaim{ObjectMeta: tc.meta}); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
