package dashboard

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/templates"
)

// courseStaff remembers, for one listing, which courses id is staff of.
type courseStaff map[types.NamespacedName]bool

// of reports whether id is staff of the course ul was made for.
func (m *courseStaff) of(ctx context.Context, r client.Reader, id session.Identity, ul *v1alpha1.Userland) bool {
	name := ul.Labels[v1alpha1.LabelCourse]
	if name == "" {
		return false
	}
	key := types.NamespacedName{Namespace: ul.Namespace, Name: name}
	if *m == nil {
		*m = courseStaff{}
	}
	staff, ok := (*m)[key]
	if !ok {
		var c v1alpha1.Course
		staff = r.Get(ctx, key, &c) == nil && course.IsStaff(&c, id.Member())
		(*m)[key] = staff
	}
	return staff
}

// staffedCourses are the courses id is staff of.
func (d *Dashboard) staffedCourses(ctx context.Context, id session.Identity) []v1alpha1.Course {
	var list v1alpha1.CourseList
	if err := d.Reader.List(ctx, &list); err != nil {
		return nil
	}
	var out []v1alpha1.Course
	for i := range list.Items {
		if course.IsStaff(&list.Items[i], id.Member()) {
			out = append(out, list.Items[i])
		}
	}
	return out
}

// CourseCard is a course on a member's home page.
type CourseCard struct {
	Namespace, Name, Title, Term string
	Phase                        v1alpha1.CoursePhase
	// Staff links the course page.
	Staff bool
	// Offers are the display names of the course's templates.
	Offers []string
}

// courseCards are the courses id is a member of, with what each offers.
func (d *Dashboard) courseCards(ctx context.Context, id session.Identity) []CourseCard {
	var list v1alpha1.CourseList
	if err := d.Reader.List(ctx, &list); err != nil {
		return nil
	}
	now := d.now()
	var out []CourseCard
	for i := range list.Items {
		c := &list.Items[i]
		role, _ := course.Match(c, id.Member())
		if role == course.None {
			continue
		}
		card := CourseCard{
			Namespace: c.Namespace, Name: c.Name, Title: courseTitle(c), Phase: course.PhaseAt(c, now), Staff: role == course.Staff,
			Term: c.Spec.Term.Start.UTC().Format(time.DateOnly) + " – " + c.Spec.Term.End.UTC().Format(time.DateOnly),
		}
		for _, t := range c.Spec.Templates {
			name := t.Name
			if resolved, err := templates.ResolveRef(ctx, d.Reader, c.Namespace, course.Ref(t)); err == nil && resolved.Spec.DisplayName != "" {
				name = resolved.Spec.DisplayName
			}
			card.Offers = append(card.Offers, name)
		}
		out = append(out, card)
	}
	return out
}
