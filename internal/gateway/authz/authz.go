// Package authz decides who may reach a Userland through the gateway.
package authz

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// InstructorGroupsAnnotation on a namespace lists, comma-separated, groups
// whose members may reach every Userland in that namespace.
const InstructorGroupsAnnotation = "userland.dev/instructor-groups"

// Policy holds the gateway-wide access rules.
type Policy struct {
	// AdminGroups may reach every Userland.
	AdminGroups []string
}

// Reason says why access was granted.
type Reason string

// Reasons access is granted; empty means denied.
const (
	Owner      Reason = "owner"
	Admin      Reason = "admin"
	Instructor Reason = "instructor"
	// CourseStaff is staff of the Course that made the Userland for one
	// of its students (course.StaffMayReach).
	CourseStaff Reason = "course-staff"
)

// Allowed reports whether id may reach ul, whose namespace carries
// namespaceAnnotations. The comparison of users is exact: identities are
// whatever the identity provider asserts, and case-folding could merge two
// of them.
func (p Policy) Allowed(id session.Identity, ul *v1alpha1.Userland, namespaceAnnotations map[string]string) Reason {
	switch {
	case id.User == "":
		return ""
	case ul.Spec.User == id.User:
		return Owner
	case intersects(id.Groups, p.AdminGroups):
		return Admin
	case intersects(id.Groups, splitGroups(namespaceAnnotations[InstructorGroupsAnnotation])):
		return Instructor
	}
	return ""
}

// IsAdmin reports whether id is in an admin group.
func (p Policy) IsAdmin(id session.Identity) bool { return intersects(id.Groups, p.AdminGroups) }

func splitGroups(s string) []string {
	var out []string
	for _, g := range strings.Split(s, ",") {
		if g = strings.TrimSpace(g); g != "" {
			out = append(out, g)
		}
	}
	return out
}

func intersects(a, b []string) bool {
	for _, x := range a {
		if x != "" && slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// Check is the one access rule for every path that reaches or acts on an
// environment: proxying, upgrades, wakes, progress pages, hand-offs and
// dashboard actions. It reads the Userland and its namespace through r and
// returns the Userland with the reason id may reach it. Any failed lookup
// denies, exactly like a missing Userland, so that neither an error nor a
// refusal tells a caller that an environment exists.
func (p Policy) Check(ctx context.Context, r client.Reader, id session.Identity, key types.NamespacedName) (*v1alpha1.Userland, Reason) {
	var ul v1alpha1.Userland
	if err := r.Get(ctx, key, &ul); err != nil {
		return nil, ""
	}
	reason := p.decide(ctx, id, &ul, direct{r})
	if reason == "" {
		return nil, ""
	}
	return &ul, reason
}

// decide composes the rule, in its order of precedence: the owner and
// admins (nothing else read, the request path's common case), then staff
// of the course that made the environment for one of its students, then
// the namespace's instructors. Course staff reach only what their course
// made for its students: a course's label alone (an environment adopted
// by an earlier version) or a staff member's own environment is not
// enough (course.StaffMayReach).
func (p Policy) decide(ctx context.Context, id session.Identity, ul *v1alpha1.Userland, look lookups) Reason {
	if reason := p.Allowed(id, ul, nil); reason != "" {
		return reason
	}
	if name := ul.Labels[v1alpha1.LabelCourse]; name != "" {
		if c := look.course(ctx, types.NamespacedName{Namespace: ul.Namespace, Name: name}); c != nil &&
			course.IsStaff(c, id) && course.StaffMayReach(c, ul) {
			return CourseStaff
		}
	}
	annotations, ok := look.namespaceAnnotations(ctx, ul.Namespace)
	if !ok {
		return ""
	}
	return p.Allowed(id, ul, annotations)
}

// lookups are what decide reads besides the identity and the Userland; a
// failed read is nil or not ok, and denies.
type lookups interface {
	course(ctx context.Context, key types.NamespacedName) *v1alpha1.Course
	namespaceAnnotations(ctx context.Context, name string) (map[string]string, bool)
}

// direct reads each lookup when asked: one decision.
type direct struct{ r client.Reader }

func (d direct) course(ctx context.Context, key types.NamespacedName) *v1alpha1.Course {
	var c v1alpha1.Course
	if err := d.r.Get(ctx, key, &c); err != nil {
		return nil
	}
	return &c
}

func (d direct) namespaceAnnotations(ctx context.Context, name string) (map[string]string, bool) {
	var ns corev1.Namespace
	if err := d.r.Get(ctx, types.NamespacedName{Name: name}, &ns); err != nil {
		return nil, false
	}
	return ns.Annotations, true
}

// Batch decides, for one person within one request, access to many
// environments (the dashboard's lists, a course's page): the rule of Check,
// with each namespace and course read once however many environments
// share it.
type Batch struct {
	policy Policy
	id     session.Identity
	look   *memo
}

// NewBatch starts a batch of decisions for id, reading through r.
func (p Policy) NewBatch(r client.Reader, id session.Identity) *Batch {
	return &Batch{policy: p, id: id, look: &memo{direct: direct{r},
		courses: map[types.NamespacedName]*v1alpha1.Course{}, namespaces: map[string]namespaceEntry{}}}
}

// Reason is why the batch's person may reach ul; empty when they may not.
func (b *Batch) Reason(ctx context.Context, ul *v1alpha1.Userland) Reason {
	return b.policy.decide(ctx, b.id, ul, b.look)
}

// memo remembers direct's answers for one batch.
type memo struct {
	direct     direct
	courses    map[types.NamespacedName]*v1alpha1.Course
	namespaces map[string]namespaceEntry
}

type namespaceEntry struct {
	annotations map[string]string
	ok          bool
}

func (m *memo) course(ctx context.Context, key types.NamespacedName) *v1alpha1.Course {
	c, seen := m.courses[key]
	if !seen {
		c = m.direct.course(ctx, key)
		m.courses[key] = c
	}
	return c
}

func (m *memo) namespaceAnnotations(ctx context.Context, name string) (map[string]string, bool) {
	e, seen := m.namespaces[name]
	if !seen {
		e.annotations, e.ok = m.direct.namespaceAnnotations(ctx, name)
		m.namespaces[name] = e
	}
	return e.annotations, e.ok
}
