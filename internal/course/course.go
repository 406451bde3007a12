// Package course holds the rules of a Course that the controller, the
// gateway and the kubectl plugin must apply alike: who is on the roster
// and in which role, where the course is in its term, and what a course
// adds to a student's or staff member's pod.
package course

import (
	"slices"
	"strings"
	"time"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/identity"
)

// Role is what a user is to a course.
type Role string

// Roles; None means not on the roster (any more).
const (
	None    Role = ""
	Student Role = "student"
	Staff   Role = "staff"
)

// Enrolment bases: the roster entry that admitted a user, recorded in the
// Userland's AnnotationEnrolledBy.
const (
	BasisStudentUser   = "student-user"
	BasisStudentGroup  = "student-group:"
	BasisStudentDomain = "student-domain:"
	BasisStaffUser     = "staff-user"
	BasisStaffGroup    = "staff-group:"
)

// Match says whether m is on c's roster, in which role, and by which
// entry. Staff wins over student: an assistant who is also in the
// students' group gets staff access.
func Match(c *v1alpha1.Course, m identity.Identity) (Role, string) {
	if m.User == "" {
		return None, ""
	}
	if slices.Contains(c.Spec.Staff.Users, m.User) {
		return Staff, BasisStaffUser
	}
	for _, g := range m.Groups {
		if g != "" && slices.Contains(c.Spec.Staff.Groups, g) {
			return Staff, BasisStaffGroup + g
		}
	}
	s := c.Spec.Students
	if slices.Contains(s.Users, m.User) {
		return Student, BasisStudentUser
	}
	for _, g := range m.Groups {
		if g != "" && slices.Contains(s.Groups, g) {
			return Student, BasisStudentGroup + g
		}
	}
	if _, domain, ok := strings.Cut(m.Email, "@"); ok {
		if d := strings.ToLower(domain); slices.Contains(s.EmailDomains, d) {
			return Student, BasisStudentDomain + d
		}
	}
	return None, ""
}

// RoleOf says what the user of one of c's Userlands is to c now: listed
// users by the roster itself, the others by the entry that admitted them
// while that entry is still on the roster. A group member who left the
// group in the identity provider keeps the role until the group leaves the
// roster: the controller cannot see group membership.
func RoleOf(c *v1alpha1.Course, ul *v1alpha1.Userland) Role {
	user := ul.Spec.User
	if slices.Contains(c.Spec.Staff.Users, user) {
		return Staff
	}
	basis := ul.Annotations[v1alpha1.AnnotationEnrolledBy]
	if g, ok := strings.CutPrefix(basis, BasisStaffGroup); ok && slices.Contains(c.Spec.Staff.Groups, g) {
		return Staff
	}
	if slices.Contains(c.Spec.Students.Users, user) {
		return Student
	}
	if g, ok := strings.CutPrefix(basis, BasisStudentGroup); ok && slices.Contains(c.Spec.Students.Groups, g) {
		return Student
	}
	if d, ok := strings.CutPrefix(basis, BasisStudentDomain); ok && slices.Contains(c.Spec.Students.EmailDomains, d) &&
		strings.HasSuffix(strings.ToLower(user), "@"+d) {
		return Student
	}
	return None
}

// IsStaff reports whether m is staff of c.
func IsStaff(c *v1alpha1.Course, m identity.Identity) bool {
	role, _ := Match(c, m)
	return role == Staff
}

// PhaseAt is where c is in its term at now.
func PhaseAt(c *v1alpha1.Course, now time.Time) v1alpha1.CoursePhase {
	switch {
	case now.Before(c.Spec.Term.Start.Time):
		return v1alpha1.CourseUpcoming
	case now.Before(c.Spec.Term.End.Time):
		return v1alpha1.CourseInTerm
	case c.Spec.Lifecycle.Retention == nil || now.Before(RetireAt(c)):
		return v1alpha1.CourseEnded
	}
	return v1alpha1.CourseRetired
}

// RetireAt is when students' Userlands are deleted; the zero time when the
// course keeps them.
func RetireAt(c *v1alpha1.Course) time.Time {
	if c.Spec.Lifecycle.Retention == nil {
		return time.Time{}
	}
	return c.Spec.Term.End.Add(c.Spec.Lifecycle.Retention.Duration)
}

// NextChange is how long from now until c's phase next changes, or zero
// when it never will.
func NextChange(c *v1alpha1.Course, now time.Time) time.Duration {
	for _, at := range []time.Time{c.Spec.Term.Start.Time, c.Spec.Term.End.Time, RetireAt(c)} {
		if !at.IsZero() && now.Before(at) {
			return at.Sub(now)
		}
	}
	return 0
}

// StudentStop is why a student environment of c may not run at now, or
// empty when it may: before the term, after it, or off the roster.
func StudentStop(c *v1alpha1.Course, role Role, now time.Time) v1alpha1.StoppedReason {
	switch {
	case role == Staff:
		return ""
	case role == None:
		return v1alpha1.StoppedUnenrolled
	case now.Before(c.Spec.Term.Start.Time):
		return v1alpha1.StoppedBeforeTerm
	case !now.Before(c.Spec.Term.End.Time):
		return v1alpha1.StoppedTermEnded
	}
	return ""
}

// Find returns the template entry of c for ref, or nil.
func Find(c *v1alpha1.Course, ref v1alpha1.TemplateReference) *v1alpha1.CourseTemplate {
	for i, t := range c.Spec.Templates {
		if t.Kind.OrDefault() == ref.Kind.OrDefault() && t.Name == ref.Name {
			return &c.Spec.Templates[i]
		}
	}
	return nil
}

// Ref is the template reference of a course template.
func Ref(t v1alpha1.CourseTemplate) v1alpha1.TemplateReference {
	return v1alpha1.TemplateReference{Kind: t.Kind.OrDefault(), Name: t.Name}
}
