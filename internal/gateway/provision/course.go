package provision

import (
	"context"
	"fmt"

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
		role, basis := course.Match(c, id)
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
				Namespace: c.Namespace, Ref: ref, Name: naming.CourseCandidateNames(c.Name, id.User, ref)[0],
				DisplayName: resolved.Spec.DisplayName, Description: resolved.Spec.Description,
				Course: c.Name, Basis: basis, CourseUID: c.UID,
			})
		}
	}
	return out, nil
}
