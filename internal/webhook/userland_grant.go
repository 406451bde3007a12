package webhook

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/budgetsource"
)

var grantPath = field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationBudgetGrant)

// validateBudgetGrant refuses a create (old nil) or update that sets,
// changes or removes a Userland's budget grant unless the requester may
// grant: the custom verb grant on the course it belongs to (or, outside a
// course, on the Userland itself). The API server answers
// (SubjectAccessReview), so being listed as a course's staff, or being
// able to edit Userlands (as the owner's dashboard actions do through
// the gateway), is not enough. A value that does not parse is refused
// with the form it must take.
func (v *UserlandValidator) validateBudgetGrant(ctx context.Context, old, ul *v1alpha1.Userland) (field.ErrorList, error) {
	before, after := "", ul.Annotations[v1alpha1.AnnotationBudgetGrant]
	if old != nil {
		before = old.Annotations[v1alpha1.AnnotationBudgetGrant]
	}
	if before == after {
		return nil, nil
	}
	var g budget.Grant
	if after != "" {
		var err error
		if g, err = budget.ParseGrant(after); err != nil {
			return field.ErrorList{field.Invalid(grantPath, after, err.Error())}, nil
		}
	}
	act, err := v.grantAction(ctx, ul)
	if err != nil {
		return nil, err
	}
	who, err := requester(ctx)
	if err != nil {
		return nil, err
	}
	ok, err := v.Access.Allowed(ctx, who, act)
	if err != nil {
		return nil, fmt.Errorf("checking who may grant budget to userland %s/%s: %w", ul.Namespace, ul.Name, err)
	}
	if !ok {
		return field.ErrorList{field.Forbidden(grantPath, fmt.Sprintf(
			"%s may not %s; an administrator grants it with an RBAC rule for the verb %q (being listed as a course's staff is not enough)",
			who.User, act, v1alpha1.VerbGrant))}, nil
	}
	if msg := grantedByMismatch(g.By, who, v.GrantRecorders); msg != "" {
		return field.ErrorList{field.Invalid(grantPath, after, msg)}, nil
	}
	return nil, nil
}

// grantAction is what granting ul budget takes: grant on the course
// whose budget governs it, or otherwise on the Userland itself
// (budgetsource, the controller's rule: a course's label alone is not
// its course).
func (v *UserlandValidator) grantAction(ctx context.Context, ul *v1alpha1.Userland) (access.Action, error) {
	src, err := budgetsource.Of(ctx, v.Reader, ul)
	if err != nil {
		return access.Action{}, fmt.Errorf("finding the budget of userland %s/%s: %w", ul.Namespace, ul.Name, err)
	}
	return src.GrantAction(ul), nil
}

// grantedByMismatch says why a grant recorded as by may not be written by
// requester, or "" when it may. A person records only themself (or no
// one): the record shown to the student and in the event must not name
// another member of staff. Only recorders (the gateway's ServiceAccount,
// which records the signed-in person it asked RBAC about) name whom they
// acted for; not any ServiceAccount, since whoever holds grant can make
// one, bind it and write through it. Nor does system:masters need to
// name itself: RBAC does not bind it, and it could write as anyone by
// impersonation anyway (userland dev's gateway runs so).
func grantedByMismatch(by string, requester access.Subject, recorders []string) string {
	if by == "" || by == requester.User || slices.Contains(recorders, requester.User) ||
		slices.Contains(requester.Groups, "system:masters") {
		return ""
	}
	return fmt.Sprintf("a grant records who gave it: written by %s, it must say %q after the ';' (or nothing), not %q",
		requester.User, requester.User, by)
}

// serviceAccountPrefix begins every ServiceAccount's user name.
const serviceAccountPrefix = "system:serviceaccount:"
