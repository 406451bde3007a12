package course

import "github.com/userland-dev/userland/api/v1alpha1"

// budgetKey is what environments sharing a budget have in common: the
// namespace, the course's name and UID (as their provenance records it,
// which only requesters allowed to enroll can set) and the user.
type budgetKey struct{ namespace, course, courseUID, user string }

// keyOf is ul's budget key, and false when no course made it.
func keyOf(ul *v1alpha1.Userland) (budgetKey, bool) {
	k := budgetKey{ul.Namespace, ul.Labels[v1alpha1.LabelCourse], ul.Annotations[v1alpha1.AnnotationProvisionedByCourse], ul.Spec.User}
	return k, k.course != "" && k.courseUID != ""
}

// SharesBudget reports whether a and b draw on one compute-hour budget:
// two environments of one user made by one course. A course's budget is
// per student, so a student's editor and database count against the same
// hours. Whether the course governs them at all (it still exists and
// made them; the user is a student there) is the caller's to know: only
// environments a course budget governs carry usage.
func SharesBudget(a, b *v1alpha1.Userland) bool {
	ka, ok := keyOf(a)
	kb, _ := keyOf(b)
	return ok && ka == kb && a.Name != b.Name
}

// BudgetSharing groups environments by the budget they share, once, so
// that each one's sharers are found without comparing every pair (a
// course page lists thousands).
type BudgetSharing map[budgetKey][]*v1alpha1.Userland

// NewBudgetSharing groups all, those with usage; it keeps the pointers.
// Callers showing figures to a person pass only what that person may
// reach, so a total never reveals an environment they cannot see.
func NewBudgetSharing(all []*v1alpha1.Userland) BudgetSharing {
	s := BudgetSharing{}
	for _, ul := range all {
		if k, ok := keyOf(ul); ok && ul.Status.Usage != nil {
			s[k] = append(s[k], ul)
		}
	}
	return s
}

// Pointers are pointers to each of items, for NewBudgetSharing.
func Pointers(items []v1alpha1.Userland) []*v1alpha1.Userland {
	out := make([]*v1alpha1.Userland, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// Of is the usage of the other environments that share ul's budget.
func (s BudgetSharing) Of(ul *v1alpha1.Userland) []*v1alpha1.UsageStatus {
	k, ok := keyOf(ul)
	if !ok {
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
