package naming

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// TestCourseCandidateNames: a course environment is named for the course,
// never the user's plain names, and every form is a valid Service name.
func TestCourseCandidateNames(t *testing.T) {
	t.Parallel()
	lab := v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: "jupyterlab"}
	got := CourseCandidateNames("db", "alice@uni.example", lab)
	if diff := cmp.Diff("alice-jupyterlab--db", got[0]); diff != "" {
		t.Errorf("readable course name (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(got[1], "alice-jupyterlab---") || len(got[1]) != len("alice-jupyterlab---")+12 {
		t.Errorf("hashed course name = %q", got[1])
	}
	// Personal names never contain "--", course names always do, whatever
	// the user, template or course is called.
	odd := []string{"a", "a--b", "-x-", "u-1", "2026--db", "Ünïcode", strings.Repeat("z-", 40)}
	for _, user := range odd {
		for _, tmpl := range odd {
			ref := v1alpha1.TemplateReference{Name: tmpl}
			personal := append(CandidateNames(user, ref), NameFor(user+"/Template/"+tmpl))
			for _, n := range personal {
				if strings.Contains(n, "--") {
					t.Errorf("personal name %q contains --", n)
				}
			}
			for _, crs := range odd {
				for _, n := range CourseCandidateNames(crs, user, ref) {
					if !strings.Contains(n, "--") {
						t.Errorf("course name %q lacks --", n)
					}
				}
			}
		}
	}
	if other := CourseCandidateNames("db2", "alice@uni.example", lab); other[1] == got[1] {
		t.Errorf("two courses share the hashed name %q", got[1])
	}
	long := CourseCandidateNames(strings.Repeat("c", 63), strings.Repeat("u", 40)+"@x", v1alpha1.TemplateReference{Name: strings.Repeat("t", 60)})
	for _, n := range append(long, CourseCandidateNames("2026-intro", "42@x", lab)...) {
		if errs := validation.IsDNS1035Label(n); len(errs) > 0 {
			t.Errorf("%q is not a Service name: %v", n, errs)
		}
	}
}
