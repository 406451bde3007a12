package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/gateway/session"
	"github.com/userland-dev/userland/internal/templates"
)

// staffedCourses are the courses id is staff of.
func (d *Dashboard) staffedCourses(ctx context.Context, id session.Identity) []v1alpha1.Course {
	var list v1alpha1.CourseList
	if err := d.Reader.List(ctx, &list); err != nil {
		return nil
	}
	var out []v1alpha1.Course
	for i := range list.Items {
		if course.IsStaff(&list.Items[i], id) {
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
		role, _ := course.Match(c, id)
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

// courseChange is the permission behind every change the course page
// makes to a course as a whole: a roster import (students or staff) and
// starting, stopping or restarting everyone. It is RBAC's, asked of the
// API server, because being listed as staff is a role, not a permission
// to change who is listed: a TA who could add staff could make anyone
// staff and so reach any student.
func courseChange(c *v1alpha1.Course) access.Action {
	return access.Action{Verb: "update", Group: v1alpha1.GroupVersion.Group, Resource: "courses", Namespace: c.Namespace, Name: c.Name}
}

// rbacSubject is id as Kubernetes authorization names it (RBACNames'
// prefixes; access.Mapping keeps IdP names out of "system:").
func (d *Dashboard) rbacSubject(id session.Identity) access.Subject {
	return d.RBACNames.Subject(id.User, id.Groups)
}

// mayChangeCourse is nil when RBAC lets id change c, an *access.Denied
// when it does not, and the API server's error when it could not say
// (which callers treat as a refusal).
func (d *Dashboard) mayChangeCourse(ctx context.Context, id session.Identity, c *v1alpha1.Course) error {
	return d.Access.Require(ctx, d.rbacSubject(id), courseChange(c))
}

// courseChangeRefusal is what a person is told when the course page will
// not change the course for them, and the status a form POST gets.
func courseChangeRefusal(err error) (int, string) {
	var denied *access.Denied
	if errors.As(err, &denied) {
		return http.StatusForbidden, fmt.Sprintf("Importing a roster, adding staff and starting, stopping or restarting everyone "+
			"need the course-manager role for this course: Kubernetes does not let %s update %s. "+
			"Being listed as staff lets you see the course and its students' environments. "+
			"Ask an administrator for the userland-course-manager role in namespace %s.",
			denied.User, courseNoun(denied.Action), denied.Action.Namespace)
	}
	return http.StatusServiceUnavailable, "Whether you may change this course could not be checked with the cluster, " +
		"so nothing was changed. Try again in a minute."
}

// courseNoun names the course as kubectl does ("courses.userland.dev/db").
func courseNoun(a access.Action) string {
	return a.Resource + "." + a.Group + "/" + a.Name
}
