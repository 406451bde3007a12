package provision

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/naming"
	"github.com/userland-dev/userland/internal/templates"
)

// courseCandidates are the environments id's courses give them, every
// template of each course whatever its provision mode (a group's members
// are known only now), until the term ends.
func (p *Provisioner) courseCandidates(ctx context.Context, id session.Identity) ([]Candidate, error) {
	var list v1alpha1.CourseList
	if err := p.Reader.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing courses: %w", err)
	}
	var out []Candidate
	for i := range list.Items {
		c := &list.Items[i]
		role, basis := course.Match(c, id.Member())
		if role == course.None || !p.now().Before(c.Spec.Term.End.Time) {
			continue
		}
		for _, t := range c.Spec.Templates {
			ref := course.Ref(t)
			// The template's words for the dashboard; a missing template
			// is the course's condition to report, not a sign-in error.
			resolved, err := templates.ResolveRef(ctx, p.Reader, c.Namespace, ref)
			if err != nil {
				continue
			}
			out = append(out, Candidate{
				Namespace: c.Namespace, Ref: ref, Name: naming.ReadableName(id.User, ref.Name),
				DisplayName: resolved.Spec.DisplayName, Description: resolved.Spec.Description,
				Course: c.Name, Basis: basis,
			})
		}
	}
	return out, nil
}

// adopt labels id's existing environment from a course's template with the
// course, when it carries no course yet (made before the course, or by an
// autoProvision template).
func (p *Provisioner) adopt(ctx context.Context, c Candidate, key types.NamespacedName) error {
	if c.Course == "" {
		return nil
	}
	var ul v1alpha1.Userland
	if err := p.Reader.Get(ctx, key, &ul); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ul.Labels[v1alpha1.LabelCourse] != "" {
		return nil
	}
	patch := client.MergeFrom(ul.DeepCopy())
	if ul.Labels == nil {
		ul.Labels = map[string]string{}
	}
	if ul.Annotations == nil {
		ul.Annotations = map[string]string{}
	}
	ul.Labels[v1alpha1.LabelCourse] = c.Course
	ul.Annotations[v1alpha1.AnnotationEnrolledBy] = c.Basis
	if err := p.Writer.Patch(ctx, &ul, patch, client.FieldOwner("userland-gateway")); err != nil {
		return fmt.Errorf("adding userland %s to course %s: %w", key, c.Course, err)
	}
	return nil
}
