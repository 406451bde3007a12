package course

import (
	"testing"

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
	c := &v1alpha1.Course{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "uid-db"}}
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
		if diff := cmp.Diff([]*v1alpha1.UsageStatus{used}, NewBudgetSharing(Pointers(all)).Of(own)); diff != "" {
			t.Errorf("BudgetSharers (-want +got):\n%s", diff)
		}
	})
}
