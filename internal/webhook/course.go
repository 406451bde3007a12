package webhook

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/templates"
	"github.com/userland-dev/userland/internal/timetable"
)

// ValidateCourseSpec checks what the schema cannot say about a course on
// its own: nobody is both student and staff by name, and every time zone
// of the schedule is one the controller knows; and the term and the
// schedule's times are in order (the schema says so too; a direct caller
// of this function, such as the plugin's import, gets the same answer).
func ValidateCourseSpec(spec *v1alpha1.CourseSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !spec.Term.End.After(spec.Term.Start.Time) {
		errs = append(errs, field.Invalid(fldPath.Child("term", "end"), spec.Term.End, "must be after term.start"))
	}
	for i, u := range spec.Staff.Users {
		if slices.Contains(spec.Students.Users, u) {
			errs = append(errs, field.Duplicate(fldPath.Child("staff", "users").Index(i), u))
		}
	}
	return append(errs, timetable.Validate(spec.Schedule, fldPath.Child("schedule"))...)
}

// +kubebuilder:webhook:path=/validate-userland-dev-v1alpha1-course,mutating=false,failurePolicy=fail,sideEffects=None,groups=userland.dev,resources=courses,verbs=create;update,versions=v1alpha1,name=courses.userland.dev,admissionReviewVersions=v1,timeoutSeconds=5

// CourseValidator checks a Course against the templates it names: unlike a
// single Userland, a course names its templates for hundreds of students,
// so a missing one is refused rather than warned about.
type CourseValidator struct {
	// Reader reads templates and namespaces straight from the API server.
	Reader client.Reader
	// Access asks what the requester may do.
	Access access.Reviewer
}

// ValidateCreate checks a new Course.
func (v *CourseValidator) ValidateCreate(ctx context.Context, c *v1alpha1.Course) (admission.Warnings, error) {
	return v.validate(ctx, nil, c, true)
}

// validate checks c (old is nil on create); templates only when asked.
func (v *CourseValidator) validate(ctx context.Context, old, c *v1alpha1.Course, templates bool) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	errs := ValidateCourseSpec(&c.Spec, spec)
	volErrs, err := v.checkSharedVolumes(ctx, old, c, spec.Child("sharedVolumes"))
	if err != nil {
		return nil, err
	}
	errs = append(errs, volErrs...)
	roomErrs, err := v.checkPlaceholders(ctx, old, c, spec.Child("schedule", "placeholders"))
	if err != nil {
		return nil, err
	}
	errs = append(errs, roomErrs...)
	if !templates {
		return nil, invalid("Course", c.Name, errs)
	}
	for i, t := range c.Spec.Templates {
		path := spec.Child("templates").Index(i).Child("name")
		msg, err := v.templateProblem(ctx, c.Namespace, course.Ref(t))
		if err != nil {
			return nil, err
		}
		if msg != "" {
			errs = append(errs, field.Invalid(path, t.Name, msg))
		}
	}
	return nil, invalid("Course", c.Name, errs)
}

// templateProblem says why ref cannot serve a course in namespace, or "".
func (v *CourseValidator) templateProblem(ctx context.Context, namespace string, ref v1alpha1.TemplateReference) (string, error) {
	res, err := templates.ResolveRef(ctx, v.Reader, namespace, ref)
	switch {
	case apierrors.IsNotFound(err) && ref.Kind.OrDefault() == v1alpha1.TemplateKindTemplate:
		return fmt.Sprintf("no Template %q exists in namespace %s", ref.Name, namespace), nil
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("no ClusterTemplate %q exists", ref.Name), nil
	case err != nil:
		return "", err
	}
	allowed, _, err := allowsNamespace(ctx, v.Reader, res, namespace)
	if err != nil || allowed {
		return "", err
	}
	return fmt.Sprintf("ClusterTemplate %q does not allow namespace %q", res.Name, namespace), nil
}

// ValidateUpdate checks a changed Course. Templates are looked up again
// only when the list changed: a template deleted since is the status's
// to report, and must not block a roster change.
func (v *CourseValidator) ValidateUpdate(ctx context.Context, old, c *v1alpha1.Course) (admission.Warnings, error) {
	return v.validate(ctx, old, c, !slices.Equal(old.Spec.Templates, c.Spec.Templates))
}

// ValidateDelete allows every deletion: a course's Userlands outlive it.
func (v *CourseValidator) ValidateDelete(context.Context, *v1alpha1.Course) (admission.Warnings, error) {
	return nil, nil
}
