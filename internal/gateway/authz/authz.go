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
	// Owners and admins need nothing of the namespace: its read (the
	// instructor annotation) is skipped on the request path's common case.
	if reason := p.Allowed(id, &ul, nil); reason != "" {
		return &ul, reason
	}
	// Course staff reach only what their course made for its students: a
	// course's label alone (an environment adopted by an earlier version)
	// or a staff member's own environment is not enough.
	if name := ul.Labels[v1alpha1.LabelCourse]; name != "" {
		var c v1alpha1.Course
		if err := r.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: name}, &c); err == nil &&
			course.IsStaff(&c, id.Member()) && course.StaffMayReach(&c, &ul) {
			return &ul, CourseStaff
		}
	}
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: key.Namespace}, &ns); err != nil {
		return nil, ""
	}
	reason := p.Allowed(id, &ul, ns.Annotations)
	if reason == "" {
		return nil, ""
	}
	return &ul, reason
}
