package dashboard

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/gateway/session"
)

func member(id session.Identity) course.Member {
	return course.Member{User: id.User, Email: id.Email, Groups: id.Groups}
}

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
		staff = r.Get(ctx, key, &c) == nil && course.IsStaff(&c, member(id))
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
		if course.IsStaff(&list.Items[i], member(id)) {
			out = append(out, list.Items[i])
		}
	}
	return out
}
