package webhook

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
)

// courseLink is one piece of metadata that ties a Userland to a course.
// The controller retires what a course links, and the course's staff reach
// it, so only who may enroll in the course sets, changes or removes any.
type courseLink struct {
	path *field.Path
	get  func(*v1alpha1.Userland) string
}

var courseLinks = []courseLink{
	{field.NewPath("metadata", "labels").Key(v1alpha1.LabelCourse),
		func(ul *v1alpha1.Userland) string { return ul.Labels[v1alpha1.LabelCourse] }},
	{field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationEnrolledBy),
		func(ul *v1alpha1.Userland) string { return ul.Annotations[v1alpha1.AnnotationEnrolledBy] }},
	{field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationProvisionedByCourse),
		func(ul *v1alpha1.Userland) string { return ul.Annotations[v1alpha1.AnnotationProvisionedByCourse] }},
}

// validateCourseLink refuses a create (old nil) or update that sets,
// changes or removes a course link unless the requester may enroll in
// every course involved: the one the label names before and after. Being
// able to edit Userlands or Courses is not enough; the API server answers
// (SubjectAccessReview for the verb enroll on courses), and the controller
// and the gateway are the ones granted it. A Userland whose link does not
// change is not asked about: the controller's and the gateway's other
// writes, and everybody's edits of other fields, pass as before.
func (v *UserlandValidator) validateCourseLink(ctx context.Context, old, ul *v1alpha1.Userland) (field.ErrorList, error) {
	var changed []*field.Path
	var courses []string
	for _, l := range courseLinks {
		before, after := "", l.get(ul)
		if old != nil {
			before = l.get(old)
		}
		if before != after {
			changed = append(changed, l.path)
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	for _, u := range []*v1alpha1.Userland{old, ul} {
		if u != nil && u.Labels[v1alpha1.LabelCourse] != "" && !slices.Contains(courses, u.Labels[v1alpha1.LabelCourse]) {
			courses = append(courses, u.Labels[v1alpha1.LabelCourse])
		}
	}
	if len(courses) == 0 {
		// An enrolment or provenance annotation without a course: allowed
		// only to who may enroll in any course of the namespace.
		courses = []string{""}
	}
	who, err := requester(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range courses {
		act := access.Action{Verb: v1alpha1.VerbEnroll, Group: v1alpha1.GroupVersion.Group, Resource: "courses", Namespace: ul.Namespace, Name: name}
		ok, err := v.Access.Allowed(ctx, who, act)
		if err != nil {
			return nil, fmt.Errorf("checking who may link userland %s/%s to a course: %w", ul.Namespace, ul.Name, err)
		}
		if ok {
			continue
		}
		var errs field.ErrorList
		for _, p := range changed {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf(
				"only the course's controller and the gateway's sign-in link an environment to a course (%s may not %s); to enrol someone, add them to the Course's roster",
				who.User, act)))
		}
		return errs, nil
	}
	return nil, nil
}
