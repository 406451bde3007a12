package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
	"github.com/userland-dev/userland/internal/course"
)

// checkSharedVolumes refuses shared volumes that would hand somebody's
// data to a course: a claim that is a Userland's (a person's home), or one
// the requester may not get. Every environment of the course mounts the
// claim (read-write for staff), so naming it must take at least the right
// to see it. A claim that does not exist yet is allowed when the requester
// may get it (RBAC answers whether or not it exists), so material can be
// prepared after the course; the course's status reports it missing, and
// the controller re-checks whose it is on every reconcile. Only claims
// the update adds or renames are asked about: one already admitted must
// not block a roster change.
func (v *CourseValidator) checkSharedVolumes(ctx context.Context, old, c *v1alpha1.Course, fldPath *field.Path) (field.ErrorList, error) {
	admitted := map[string]bool{}
	if old != nil {
		for _, sv := range old.Spec.SharedVolumes {
			admitted[sv.ClaimName] = true
		}
	}
	var errs field.ErrorList
	var who *access.Subject
	for i, sv := range c.Spec.SharedVolumes {
		if admitted[sv.ClaimName] {
			continue
		}
		path := fldPath.Index(i).Child("claimName")
		var pvc corev1.PersistentVolumeClaim
		err := v.Reader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: sv.ClaimName}, &pvc)
		switch {
		case err == nil && course.IsUserlandClaim(&pvc):
			errs = append(errs, field.Forbidden(path, fmt.Sprintf(
				"claim %q belongs to a Userland: a person's data is never course material; put the material in a claim of its own", sv.ClaimName)))
			continue
		case err != nil && !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("getting shared claim %s/%s: %w", c.Namespace, sv.ClaimName, err)
		}
		if who == nil {
			s, err := requester(ctx)
			if err != nil {
				return nil, err
			}
			who = &s
		}
		// Students mount shared material read-only, staff read-write
		// (internal/course/pod.go): whoever shares a claim hands on both,
		// so they must hold both themselves.
		for _, verb := range []string{"get", "update"} {
			act := access.Action{Verb: verb, Resource: "persistentvolumeclaims", Namespace: c.Namespace, Name: sv.ClaimName}
			ok, err := v.Access.Allowed(ctx, *who, act)
			if err != nil {
				return nil, fmt.Errorf("checking who may share claim %s/%s: %w", c.Namespace, sv.ClaimName, err)
			}
			if !ok {
				errs = append(errs, field.Forbidden(path, fmt.Sprintf(
					"%s may not %s: a course shares only claims its manager may read and write (staff mount them read-write)", who.User, act)))
				break
			}
		}
	}
	return errs, nil
}
