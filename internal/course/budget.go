package course

import (
	"time"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// budgetKey is what environments sharing a budget have in common: the
// namespace, the course's name and UID (as their provenance records it,
// which only requesters allowed to enroll can set) and the user.
type budgetKey struct{ namespace, course, courseUID, user string }

// keyOf is ul's budget key, and false when no course made it.
func keyOf(ul *v1alpha1.Userland) (budgetKey, bool) {
	k := budgetKey{ul.Namespace, ul.Labels[v1alpha1.LabelCourse], ul.Annotations[v1alpha1.AnnotationProvisionedByCourse], ul.Spec.User}
	return k, k.course != "" && k.courseUID != ""
}

// BudgetGoverns reports whether c's budget governs ul: c (the Course
// its label names, nil when there is none) made it, has a budget, and
// counts its user as a student (staff are exempt). Then the budget is the
// student's, shared by all their environments c made; otherwise an
// environment's budget, if any, is its template's and its own. The
// controller decides with this, and every reader groups with it, so a
// page never pools what the controller does not (a deleted course's
// environments go back to their templates' budgets, one each).
func BudgetGoverns(c *v1alpha1.Course, ul *v1alpha1.Userland) bool {
	return c != nil && c.Spec.Limits.Budget != nil && Provisioned(c, ul) && RoleOf(c, ul) == Student
}

// BudgetFor is the budget that governs ul, and whether it is its
// course's: c's when c governs it (BudgetGoverns); none when c made it
// otherwise (c's staff, or a course without a budget: a course decides
// for what it made); its template's (tmpl, nil when unknown) outside a
// course. c is the Course ul's label names, nil when there is none; one
// that did not make ul (Provisioned) counts as none. The controller
// enforces this budget, and every grant asks RBAC about whose it is.
func BudgetFor(c *v1alpha1.Course, ul *v1alpha1.Userland, tmpl *v1alpha1.TemplateSpec) (spec *v1alpha1.BudgetSpec, termStart time.Time, ofCourse bool) {
	switch {
	case BudgetGoverns(c, ul):
		return c.Spec.Limits.Budget, c.Spec.Term.Start.Time, true
	case c != nil && Provisioned(c, ul):
		return nil, time.Time{}, false
	case tmpl != nil:
		return tmpl.Budget, time.Time{}, false
	}
	return nil, time.Time{}, false
}

// SharesBudget reports whether a and b, both governed by their course's
// budget (BudgetGoverns), draw on one budget: two environments of one
// user made by one course.
func SharesBudget(a, b *v1alpha1.Userland) bool {
	ka, ok := keyOf(a)
	kb, _ := keyOf(b)
	return ok && ka == kb && a.Name != b.Name
}

// BudgetSharing groups environments by the budget they share, once, so
// that each one's sharers are found without comparing every pair (a
// course page lists thousands).
type BudgetSharing map[budgetKey][]*v1alpha1.Userland

// CourseLookup finds the Course of a namespace and name, nil when there
// is none.
type CourseLookup func(namespace, name string) *v1alpha1.Course

// NewBudgetSharing groups those of all with usage that their course's
// budget governs (BudgetGoverns, with the Course courseOf finds); it keeps
// the pointers. Callers showing figures to a person pass only what that
// person may reach, so a total never reveals an environment they cannot
// see.
func NewBudgetSharing(all []*v1alpha1.Userland, courseOf CourseLookup) BudgetSharing {
	s := BudgetSharing{}
	for _, ul := range all {
		k, ok := keyOf(ul)
		if !ok || ul.Status.Usage == nil || !BudgetGoverns(courseOf(ul.Namespace, k.course), ul) {
			continue
		}
		s[k] = append(s[k], ul)
	}
	return s
}

// OneCourse is a CourseLookup that knows only c.
func OneCourse(c *v1alpha1.Course) CourseLookup {
	return func(namespace, name string) *v1alpha1.Course {
		if c != nil && c.Namespace == namespace && c.Name == name {
			return c
		}
		return nil
	}
}

// Pointers are pointers to each of items, for NewBudgetSharing.
func Pointers(items []v1alpha1.Userland) []*v1alpha1.Userland {
	out := make([]*v1alpha1.Userland, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// Of is the usage of the other environments that share ul's budget;
// none unless ul's own course budget governs it (it is then in s).
func (s BudgetSharing) Of(ul *v1alpha1.Userland) []*v1alpha1.UsageStatus {
	k, ok := keyOf(ul)
	if !ok || !s.holds(k, ul) {
		return nil
	}
	var out []*v1alpha1.UsageStatus
	for _, o := range s[k] {
		if o.Name != ul.Name {
			out = append(out, o.Status.Usage)
		}
	}
	return out
}

// BudgetGroup names the budget ul shares as one string (for a cache
// index), "" when no course made it. Equal names mean a shared budget.
func BudgetGroup(ul *v1alpha1.Userland) string {
	k, ok := keyOf(ul)
	if !ok {
		return ""
	}
	// Only the user may hold a "/"; it comes last.
	return k.namespace + "/" + k.course + "/" + k.courseUID + "/" + k.user
}

// holds reports whether ul itself was grouped under k.
func (s BudgetSharing) holds(k budgetKey, ul *v1alpha1.Userland) bool {
	for _, o := range s[k] {
		if o.Name == ul.Name {
			return true
		}
	}
	return false
}

// Remembered is a CourseLookup that asks get once per course (get
// returns nil, or an error, for none): a page of thousands of rows reads
// each course once.
func Remembered(get func(namespace, name string) (*v1alpha1.Course, error)) CourseLookup {
	seen := map[[2]string]*v1alpha1.Course{}
	return func(namespace, name string) *v1alpha1.Course {
		key := [2]string{namespace, name}
		if c, ok := seen[key]; ok {
			return c
		}
		c, err := get(namespace, name)
		if err != nil {
			c = nil
		}
		seen[key] = c
		return c
	}
}
