package course

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// NewUserland is the environment c creates for user from ref, admitted by
// the roster entry basis: linked to c by its label, enrolment basis and
// provenance. Its name is userlands.Create's to choose (for the course).
// The controller (listed users) and the gateway (sign-in) create course
// environments only through it.
func NewUserland(c *v1alpha1.Course, user, basis string, ref v1alpha1.TemplateReference) *v1alpha1.Userland {
	return &v1alpha1.Userland{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: c.Namespace,
			Labels:    map[string]string{v1alpha1.LabelCourse: c.Name},
			Annotations: map[string]string{
				v1alpha1.AnnotationEnrolledBy:          basis,
				v1alpha1.AnnotationProvisionedByCourse: string(c.UID),
			},
		},
		Spec: v1alpha1.UserlandSpec{User: user, TemplateRef: ref},
	}
}

// Provisioned reports whether c itself created ul: ul carries c's label
// and the UID of this very Course (not an earlier one of the same name) in
// its provenance annotation. Both are set only by requesters allowed to
// enroll in c (the webhook checks), so a course manager cannot make
// anybody's environment look like the course's.
func Provisioned(c *v1alpha1.Course, ul *v1alpha1.Userland) bool {
	return c.UID != "" && ul.Namespace == c.Namespace &&
		ul.Labels[v1alpha1.LabelCourse] == c.Name &&
		ul.Annotations[v1alpha1.AnnotationProvisionedByCourse] == string(c.UID)
}

// IsStudentBasis reports whether an enrolment basis (AnnotationEnrolledBy)
// is a student roster entry.
func IsStudentBasis(basis string) bool {
	return basis == BasisStudentUser ||
		strings.HasPrefix(basis, BasisStudentGroup) || strings.HasPrefix(basis, BasisStudentDomain)
}

// MadeForStudent reports whether c created ul for one of its students.
func MadeForStudent(c *v1alpha1.Course, ul *v1alpha1.Userland) bool {
	return Provisioned(c, ul) && IsStudentBasis(ul.Annotations[v1alpha1.AnnotationEnrolledBy])
}

// StaffMayReach is the one rule for what c's staff reach through the
// gateway: environments c created for a student who is a student of c
// now. Not staff's own, not a student's environment from outside the
// course, not one an earlier version adopted into it.
func StaffMayReach(c *v1alpha1.Course, ul *v1alpha1.Userland) bool {
	return MadeForStudent(c, ul) && RoleOf(c, ul) == Student
}

// Retires reports whether c's retirement deletes ul: an environment c
// created for a student, unless its user is staff now. Students who left
// the roster are retired with the rest.
func Retires(c *v1alpha1.Course, ul *v1alpha1.Userland) bool {
	return MadeForStudent(c, ul) && RoleOf(c, ul) != Staff
}

// IsUserlandClaim reports whether pvc holds a person's data: a claim a
// Userland made (its label) or owns. A course may not share it.
func IsUserlandClaim(pvc *corev1.PersistentVolumeClaim) bool {
	if pvc.Labels[v1alpha1.LabelUserland] != "" {
		return true
	}
	for _, o := range pvc.OwnerReferences {
		if o.Kind == "Userland" && strings.HasPrefix(o.APIVersion, v1alpha1.GroupVersion.Group+"/") {
			return true
		}
	}
	return false
}
