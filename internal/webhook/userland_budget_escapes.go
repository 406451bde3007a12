package webhook

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
	"github.com/userland-dev/userland/internal/templates"
)

// validateBudgetEscapes refuses the two changes that hand a budgeted
// environment's deletion, or a second budget, to someone else, unless the
// requester may what they amount to (grant on the course or Userland, or
// enroll in its course, as the controller may):
//   - an owner reference set or changed: the garbage collector, whose
//     deletions the deletion check lets through, would delete the
//     environment once the owner is gone (or at once, for an absent one),
//     and its course or the sign-in makes it again with none used;
//   - another template for an environment its course made: the course
//     then makes the student one of the course's template again, with a
//     whole budget, beside the one that used its hours.
//
// Whoever may edit Userlands (a teaching assistant with edit) can do
// neither without grant.
func (v *UserlandValidator) validateBudgetEscapes(ctx context.Context, old, ul *v1alpha1.Userland) (field.ErrorList, error) {
	var errs field.ErrorList
	var oldOwners any
	if old != nil {
		oldOwners = old.OwnerReferences
	}
	if (old == nil && len(ul.OwnerReferences) > 0) || (old != nil && !equality.Semantic.DeepEqual(oldOwners, ul.OwnerReferences)) {
		budgeted, err := v.budgeted(ctx, ul)
		if err != nil {
			return nil, err
		}
		if budgeted {
			path := field.NewPath("metadata", "ownerReferences")
			if e, err := v.requireAny(ctx, ul, path, "an owner would let the garbage collector delete it, and it would be made again with a fresh budget"); err != nil || e != nil {
				return append(errs, e...), err
			}
		}
	}
	if old != nil && old.Labels[v1alpha1.LabelCourse] != "" && old.Spec.TemplateRef != ul.Spec.TemplateRef {
		path := field.NewPath("spec", "templateRef")
		e, err := v.requireAny(ctx, old, path, "its course would make the student another environment of the course's template, with a fresh budget")
		if err != nil {
			return nil, err
		}
		errs = append(errs, e...)
	}
	return errs, nil
}

// requireAny is nil when the requester may grant on ul (grantAction) or
// enroll in its course; otherwise a Forbidden at path saying why.
func (v *UserlandValidator) requireAny(ctx context.Context, ul *v1alpha1.Userland, path *field.Path, why string) (field.ErrorList, error) {
	who, err := requester(ctx)
	if err != nil {
		return nil, err
	}
	grant, err := v.grantAction(ctx, ul)
	if err != nil {
		return nil, err
	}
	ok, err := v.mayGrantOrEnroll(ctx, who, ul, grant)
	if err != nil || ok {
		return nil, err
	}
	return field.ErrorList{field.Forbidden(path, fmt.Sprintf("%s may not %s: %s, which takes RBAC's verb %q", who.User, grant, why, v1alpha1.VerbGrant))}, nil
}

// mayGrantOrEnroll reports whether RBAC lets who grant on ul (grant, as
// grantAction says) or, as the controller may, enroll in the course its
// label names: what deleting a used environment, or handing its deletion
// or a second budget to someone else, takes.
func (v *UserlandValidator) mayGrantOrEnroll(ctx context.Context, who access.Subject, ul *v1alpha1.Userland, grant access.Action) (bool, error) {
	acts := []access.Action{grant}
	if c := ul.Labels[v1alpha1.LabelCourse]; c != "" {
		acts = append(acts, access.Action{Verb: v1alpha1.VerbEnroll, Group: v1alpha1.GroupVersion.Group, Resource: "courses", Namespace: ul.Namespace, Name: c})
	}
	for _, act := range acts {
		ok, err := v.Access.Allowed(ctx, who, act)
		if err != nil {
			return false, fmt.Errorf("checking what %s may do to userland %s/%s: %w", who.User, ul.Namespace, ul.Name, err)
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// budgeted reports whether a compute-hour budget may govern ul: it has
// recorded usage, its course has a budget, or its template has one.
func (v *UserlandValidator) budgeted(ctx context.Context, ul *v1alpha1.Userland) (bool, error) {
	if ul.Status.Usage != nil {
		return true, nil
	}
	if name := ul.Labels[v1alpha1.LabelCourse]; name != "" {
		var c v1alpha1.Course
		err := v.Reader.Get(ctx, client.ObjectKey{Namespace: ul.Namespace, Name: name}, &c)
		if err == nil && c.Spec.Limits.Budget != nil {
			return true, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("reading course %s/%s: %w", ul.Namespace, name, err)
		}
	}
	t, err := templates.Resolve(ctx, v.Reader, ul)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the template of userland %s/%s: %w", ul.Namespace, ul.Name, err)
	}
	return t.Spec.Budget != nil, nil
}
