// Package budgetsource finds, through a client, the budget that governs
// an environment (course.BudgetFor decides from the objects), and what a
// grant on it takes: for whoever acts on a person's behalf outside the
// controller (the webhook, the gateway's pages and waits, kubectl
// userland grant), so each asks the same question the controller
// enforces rather than trusting a label.
package budgetsource

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/templates"
)

// Source is the budget that governs one environment.
type Source struct {
	// Spec is the budget; nil when none governs the environment.
	Spec *v1alpha1.BudgetSpec
	// TermStart begins a term budget's only period.
	TermStart time.Time
	// Course is the Course that made the environment, nil when none did:
	// then its budget is the course's to decide (its student's hours,
	// shared by all their environments of it, or none for its staff or
	// without a budget), and so is a grant on it.
	Course *v1alpha1.Course
	// Template is the environment's template's spec when it was read
	// (outside a course); it is nil otherwise.
	Template *v1alpha1.TemplateSpec
}

// Of reads the Course ul's label names and, when no course made ul, its
// template, and says which budget governs it. A label naming no Course,
// or one that did not make ul, is no course: a deleted course's
// environments go back to their templates' budgets, one each. A template
// that does not exist is no budget.
func Of(ctx context.Context, r client.Reader, ul *v1alpha1.Userland) (Source, error) {
	var made *v1alpha1.Course
	if name := ul.Labels[v1alpha1.LabelCourse]; name != "" {
		var c v1alpha1.Course
		err := r.Get(ctx, types.NamespacedName{Namespace: ul.Namespace, Name: name}, &c)
		switch {
		case err == nil && course.Provisioned(&c, ul):
			made = &c
		case err != nil && !apierrors.IsNotFound(err):
			return Source{}, fmt.Errorf("reading course %s/%s: %w", ul.Namespace, name, err)
		}
	}
	var tmpl *v1alpha1.TemplateSpec
	if made == nil {
		t, err := templates.Resolve(ctx, r, ul)
		switch {
		case err == nil:
			tmpl = t.Spec
		case !apierrors.IsNotFound(err):
			return Source{}, fmt.Errorf("reading the template of userland %s/%s: %w", ul.Namespace, ul.Name, err)
		}
	}
	spec, termStart, _ := course.BudgetFor(made, ul, tmpl)
	return Source{Spec: spec, TermStart: termStart, Course: made, Template: tmpl}, nil
}

// GrantAction is what granting ul hours takes in RBAC: the verb grant on
// the course that made it, or otherwise on the Userland itself. A course's label alone does not make it the course's: grant on
// a Course of that name (perhaps deleted, perhaps never made) would
// otherwise reach an environment whose budget is its template's.
func (s Source) GrantAction(ul *v1alpha1.Userland) access.Action {
	if s.Course != nil {
		return access.Action{Verb: v1alpha1.VerbGrant, Group: v1alpha1.GroupVersion.Group, Resource: "courses", Namespace: ul.Namespace, Name: s.Course.Name}
	}
	return access.Action{Verb: v1alpha1.VerbGrant, Group: v1alpha1.GroupVersion.Group, Resource: "userlands", Namespace: ul.Namespace, Name: ul.Name}
}
