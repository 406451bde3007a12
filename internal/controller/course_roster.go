package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/userlands"
)

// claimRecheck is how often a shared claim that is not usable yet is
// looked at again: claims are not watched, since the cache holds only
// Userland's own.
const claimRecheck = 30 * time.Second

// checkSharedVolumes finds the first shared claim that every environment
// of the course could not mount: missing, unbound, or limited to one
// node. Environments mount it regardless; the condition says why theirs
// may not start. A claim that is a Userland's (a person's data, which the
// webhook refuses but which may have been named before, or labelled
// since) is reported before any other problem, and environments do not
// mount it (UserlandReconciler.shareableCourse).
func (r *CourseReconciler) checkSharedVolumes(ctx context.Context, s *courseState) (ctrl.Result, error) {
	for _, v := range s.c.Spec.SharedVolumes {
		var pvc corev1.PersistentVolumeClaim
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.c.Namespace, Name: v.ClaimName}, &pvc)
		if err == nil && course.IsUserlandClaim(&pvc) {
			s.volumeProblem = &finding{v1alpha1.ReasonClaimOfUserland,
				fmt.Sprintf("shared volume %s: claim %q belongs to a Userland (a person's data), so no environment of the course mounts it; put course material in a claim of its own",
					v.Name, v.ClaimName)}
			return ctrl.Result{RequeueAfter: claimRecheck}, nil
		}
		if s.volumeProblem != nil {
			continue // the first other problem is reported; only a Userland's claim overrides it
		}
		switch {
		case apierrors.IsNotFound(err):
			s.volumeProblem = &finding{v1alpha1.ReasonClaimNotFound,
				fmt.Sprintf("shared volume %s: claim %q does not exist; environments wait for it", v.Name, v.ClaimName)}
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("getting shared claim %s/%s: %w", s.c.Namespace, v.ClaimName, err)
		case pvc.Status.Phase != corev1.ClaimBound:
			s.volumeProblem = &finding{v1alpha1.ReasonClaimNotBound,
				fmt.Sprintf("shared volume %s: claim %q is not bound to a volume yet; environments wait for it", v.Name, v.ClaimName)}
		case !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) && !slices.Contains(pvc.Spec.AccessModes, corev1.ReadOnlyMany):
			s.volumeProblem = &finding{v1alpha1.ReasonClaimNotShareable,
				fmt.Sprintf("shared volume %s: claim %q is %v, so only environments on one node can mount it; use a ReadWriteMany or ReadOnlyMany claim", v.Name, v.ClaimName, pvc.Spec.AccessModes)}
		}
	}
	if s.volumeProblem != nil {
		return ctrl.Result{RequeueAfter: claimRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// provisionRoster creates the up-front environments of every listed
// student and staff member that are missing, until the term ends. A
// user's existing environment from the template (from before the course,
// say) is never adopted: the course gets its own, named for it, so
// nothing of the user's reaches the course's staff or its retirement.
func (r *CourseReconciler) provisionRoster(ctx context.Context, s *courseState) (ctrl.Result, error) {
	if !s.now.Before(s.c.Spec.Term.End.Time) {
		return ctrl.Result{}, nil
	}
	var upFront []v1alpha1.TemplateReference
	for _, t := range s.c.Spec.Templates {
		if t.Provision == v1alpha1.ProvisionUpFront && !slices.Contains(s.missing, course.Ref(t)) {
			upFront = append(upFront, course.Ref(t))
		}
	}
	if len(upFront) == 0 {
		return ctrl.Result{}, nil
	}
	idx, err := userlands.NewIndex(ctx, r.Client, s.c.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	members := map[string]string{}
	for _, u := range s.c.Spec.Students.Users {
		members[u] = course.BasisStudentUser
	}
	for _, u := range s.c.Spec.Staff.Users {
		members[u] = course.BasisStaffUser
	}
	for _, user := range slices.Sorted(maps.Keys(members)) {
		for _, ref := range upFront {
			if err := r.ensureUserland(ctx, s, idx, user, members[user], ref); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	return ctrl.Result{}, nil
}

// ensureUserland creates user's environment of the course from ref
// unless one carries the course's label already (one an earlier version
// adopted counts: the student is not given a second one).
func (r *CourseReconciler) ensureUserland(ctx context.Context, s *courseState, idx *userlands.Index, user, basis string, ref v1alpha1.TemplateReference) error {
	if idx.FindFor(user, ref, s.c.Name) != nil {
		return nil
	}
	_, _, err := idx.Create(ctx, r.Client, r.Client, course.NewUserland(s.c, user, basis, ref), client.FieldOwner(FieldOwner))
	return err
}

// retire deletes the students' environments once the retention after the
// term has passed, each after a ready snapshot of every claim when the
// course names a snapshot class. Only environments this course created
// for students are deleted (course.Retires): staff's stay, and so does
// anything else that carries the course's label.
func (r *CourseReconciler) retire(ctx context.Context, s *courseState) (ctrl.Result, error) {
	if course.PhaseAt(s.c, s.now) != v1alpha1.CourseRetired {
		return ctrl.Result{}, nil
	}
	class := s.c.Spec.Lifecycle.VolumeSnapshotClassName
	pending := 0
	for i := range s.userlands {
		ul := &s.userlands[i]
		if !course.Retires(s.c, ul) || !ul.DeletionTimestamp.IsZero() {
			continue
		}
		if class != nil {
			ready, err := r.snapshotClaims(ctx, s, ul, *class)
			if err != nil {
				return ctrl.Result{}, err
			}
			if !ready {
				pending++
				continue
			}
		}
		if err := r.Client.Delete(ctx, ul, client.Preconditions{UID: &ul.UID}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("deleting userland %s/%s after the term: %w", ul.Namespace, ul.Name, err)
		}
		r.Recorder.Eventf(s.c, ul, corev1.EventTypeNormal, "Retired", "Delete", "deleted %s's environment %s after the term's retention", ul.Spec.User, ul.Name)
	}
	if pending > 0 {
		s.waiting = fmt.Sprintf("%d environments wait for their volume snapshots to be ready before they are deleted", pending)
		// Snapshots are not watched (nor is their removal, for a
		// mismatched one): look again.
		return ctrl.Result{RequeueAfter: claimRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// snapshotClaims makes sure every claim of ul has a VolumeSnapshot of the
// course's class, and reports whether all are ready to use. A snapshot of
// the final name that the course did not take of that claim after the
// term (finalSnapshotMismatch) is never ready: it may hold anything, or
// nothing of the claim's last state, so the environment stays and the
// course says why. Only claims of ul's user count: an earlier Userland of
// its name (another user's) may have left retained claims with its name
// label, which must not be snapshotted as this user's.
func (r *CourseReconciler) snapshotClaims(ctx context.Context, s *courseState, ul *v1alpha1.Userland, class string) (bool, error) {
	var claims corev1.PersistentVolumeClaimList
	if err := r.Client.List(ctx, &claims, client.InNamespace(ul.Namespace),
		client.MatchingLabels{v1alpha1.LabelUserland: ul.Name, LabelUser: UserHash(ul.Spec.User)}); err != nil {
		return false, fmt.Errorf("listing claims of %s/%s: %w", ul.Namespace, ul.Name, err)
	}
	ready := true
	for _, pvc := range claims.Items {
		name := SnapshotName(pvc.Name)
		var snap snapshotv1.VolumeSnapshot
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: pvc.Namespace, Name: name}, &snap)
		switch {
		case apierrors.IsNotFound(err):
			snap = snapshotv1.VolumeSnapshot{
				ObjectMeta: metav1.ObjectMeta{
					Name: name, Namespace: pvc.Namespace,
					Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelCourse: s.c.Name, LabelUser: UserHash(ul.Spec.User)},
				},
				Spec: snapshotv1.VolumeSnapshotSpec{
					Source:                  snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To(pvc.Name)},
					VolumeSnapshotClassName: ptr.To(class),
				},
			}
			if err := r.Client.Create(ctx, &snap, client.FieldOwner(FieldOwner)); err != nil && !apierrors.IsAlreadyExists(err) {
				return false, fmt.Errorf("creating snapshot %s/%s of claim %s: %w", pvc.Namespace, name, pvc.Name, err)
			}
			ready = false
		case meta.IsNoMatchError(err):
			return false, fmt.Errorf("volume snapshots are not available in this cluster (install the CSI snapshot CRDs and controller, or remove lifecycle.volumeSnapshotClassName): %w", err)
		case err != nil:
			return false, fmt.Errorf("getting snapshot %s/%s: %w", pvc.Namespace, name, err)
		default:
			if why := finalSnapshotMismatch(s.c, &pvc, &snap); why != "" {
				if s.snapshotMismatch == nil {
					s.snapshotMismatch = &finding{v1alpha1.ReasonSnapshotMismatch, fmt.Sprintf(
						"%s's environment %s is not deleted: snapshot %s %s; delete it and the course takes its own",
						ul.Spec.User, ul.Name, name, why)}
				}
				ready = false
				continue
			}
			ready = ready && snap.Status != nil && ptr.Deref(snap.Status.ReadyToUse, false)
		}
	}
	return ready, nil
}

// finalSnapshotMismatch says why snap is not the course's final snapshot
// of pvc, or "": it must be of that claim, carry the course's label and
// have been taken no earlier than the term's end. Anyone who may create
// snapshots could have made one of the name first.
func finalSnapshotMismatch(c *v1alpha1.Course, pvc *corev1.PersistentVolumeClaim, snap *snapshotv1.VolumeSnapshot) string {
	switch {
	case ptr.Deref(snap.Spec.Source.PersistentVolumeClaimName, "") != pvc.Name:
		return fmt.Sprintf("is not of claim %s", pvc.Name)
	case snap.Labels[v1alpha1.LabelCourse] != c.Name:
		return fmt.Sprintf("does not carry the label %s=%s", v1alpha1.LabelCourse, c.Name)
	case snap.CreationTimestamp.Before(&c.Spec.Term.End):
		return fmt.Sprintf("was taken at %s, before the term ended", snap.CreationTimestamp.UTC().Format(time.RFC3339))
	}
	return ""
}

// SnapshotName names the snapshot taken of a claim at the end of a
// course.
func SnapshotName(claim string) string {
	const suffix = "-final"
	if len(claim) > 253-len(suffix) {
		claim = claim[:253-len(suffix)]
	}
	return claim + suffix
}

// countStudents recounts the status: students, not environments.
func (r *CourseReconciler) countStudents(_ context.Context, s *courseState) (ctrl.Result, error) {
	type student struct {
		templates              int
		running, ready, queued bool
	}
	students := map[string]*student{}
	for _, u := range s.c.Spec.Students.Users {
		if !slices.Contains(s.c.Spec.Staff.Users, u) {
			students[u] = &student{}
		}
	}
	for i := range s.userlands {
		ul := &s.userlands[i]
		if course.RoleOf(s.c, ul) != course.Student || course.Find(s.c, ul.Spec.TemplateRef) == nil {
			continue
		}
		st := students[ul.Spec.User]
		if st == nil {
			st = &student{}
			students[ul.Spec.User] = st
		}
		st.templates++
		switch ul.Status.Phase {
		case v1alpha1.PhaseReady:
			st.running, st.ready = true, true
		case v1alpha1.PhaseStarting:
			st.running = true
		}
		st.queued = st.queued || ul.Status.StoppedReason == v1alpha1.StoppedQueued
	}
	next := &s.c.Status
	next.Enrolled, next.Provisioned, next.Running, next.Ready, next.Queued = int32(len(students)), 0, 0, 0, 0
	for _, st := range students {
		if st.templates >= len(s.c.Spec.Templates) {
			next.Provisioned++
		}
		if st.running {
			next.Running++
		}
		if st.ready {
			next.Ready++
		}
		if st.queued {
			next.Queued++
		}
	}
	return ctrl.Result{}, nil
}
