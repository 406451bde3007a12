package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
)

// IndexCourseKey indexes cached Userlands by "<namespace>/<course>", the
// course their label names.
const IndexCourseKey = "userland.dev/course"

// IndexUserlandByCourse is the indexer function for IndexCourseKey.
func IndexUserlandByCourse(obj client.Object) []string {
	name := obj.GetLabels()[v1alpha1.LabelCourse]
	if name == "" {
		return nil
	}
	return []string{obj.GetNamespace() + "/" + name}
}

// resolveCourse reads the Course a Userland's label names, from the cache.
// A label naming no Course leaves the Userland a plain one: deleting a
// course must not stop or delete anybody's work.
func (r *UserlandReconciler) resolveCourse(ctx context.Context, s *reconcileState) (ctrl.Result, error) {
	name := s.ul.Labels[v1alpha1.LabelCourse]
	if name == "" {
		return ctrl.Result{}, nil
	}
	var c v1alpha1.Course
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.ul.Namespace, Name: name}, &c); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting course %s/%s: %w", s.ul.Namespace, name, err)
	}
	// Only the course that made this environment governs it (its UID in
	// AnnotationProvisionedByCourse): a later Course of the same name, or
	// a label from an earlier version, must not stop it, queue it, cap it
	// or mount its material into it.
	if !course.Provisioned(&c, s.ul) {
		return ctrl.Result{}, nil
	}
	if err := r.dropPrivateClaims(ctx, &c); err != nil {
		return ctrl.Result{}, err
	}
	s.course = &c
	s.role = course.RoleOf(&c, s.ul)
	return ctrl.Result{}, nil
}

// dropPrivateClaims removes from c (a copy) the shared volumes whose
// claim is a Userland's: a course must never hand one person's data to
// its students, or read-write to its staff. The webhook refuses such
// claims; this holds for courses admitted before it, or a claim labelled
// since. The cache holds exactly the claims Userland manages, so a claim
// it does not hold is not a Userland's; the course reports the ones
// dropped (ReasonClaimOfUserland).
func (r *UserlandReconciler) dropPrivateClaims(ctx context.Context, c *v1alpha1.Course) error {
	kept := c.Spec.SharedVolumes[:0:0]
	for _, v := range c.Spec.SharedVolumes {
		obj, err := r.getCached(ctx, types.NamespacedName{Namespace: c.Namespace, Name: v.ClaimName}, &corev1.PersistentVolumeClaim{})
		if err != nil {
			return fmt.Errorf("checking shared claim of course %s/%s: %w", c.Namespace, c.Name, err)
		}
		if obj == nil || !course.IsUserlandClaim(obj.(*corev1.PersistentVolumeClaim)) {
			kept = append(kept, v)
		}
	}
	c.Spec.SharedVolumes = kept
	return nil
}

// admit decides, for one course at a time, whether s may start within
// maxRunning. Running students are those whose Deployment (in the cache)
// has a replica, plus those admitted here that the cache may not show
// yet. The waiting ones queue by when they asked (their last activity),
// then by name. It returns 0 when admitted, else the place in the queue.
func (r *UserlandReconciler) admit(ctx context.Context, s *reconcileState, maxRunning int, since time.Time) (int, error) {
	key := s.ul.Namespace + "/" + s.course.Name
	r.queue.mu.Lock()
	defer r.queue.mu.Unlock()
	var list v1alpha1.UserlandList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexCourseKey: key}, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("listing userlands of course %s: %w", key, err)
	}
	self := client.ObjectKeyFromObject(s.ul)
	type waiter struct {
		name  string
		since time.Time
	}
	waiting := []waiter{{self.Name, since}}
	running := 0
	for i := range list.Items {
		ul := &list.Items[i]
		k := client.ObjectKeyFromObject(ul)
		if k == self || course.RoleOf(s.course, ul) != course.Student {
			continue
		}
		var dep appsv1.Deployment
		err := r.Client.Get(ctx, k, &dep)
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("getting deployment %s: %w", k, err)
		}
		switch {
		case err == nil && dep.Spec.Replicas != nil && *dep.Spec.Replicas > 0:
			// The cache shows the start: no need to remember it.
			r.queue.forget(k)
			running++
		case r.queue.recentlyAdmitted(k, s.now):
			running++
		case ul.Status.StoppedReason == v1alpha1.StoppedQueued:
			waiting = append(waiting, waiter{ul.Name, course.AskedSince(ul)})
		}
	}
	slices.SortFunc(waiting, func(a, b waiter) int {
		return cmp.Or(a.since.Compare(b.since), cmp.Compare(a.name, b.name))
	})
	place := slices.IndexFunc(waiting, func(w waiter) bool { return w.name == self.Name })
	free := maxRunning - running
	if place < free {
		r.queue.admitted(self, s.now)
		return 0, nil
	}
	return place - max(free, 0) + 1, nil
}

// queueChanged passes Userlands that joined or left a queue: the places
// of the others in it change.
var queueChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(e event.DeleteEvent) bool { return queued(e.Object) },
	UpdateFunc:  func(e event.UpdateEvent) bool { return queued(e.ObjectOld) != queued(e.ObjectNew) },
}

func queued(obj client.Object) bool {
	ul, ok := obj.(*v1alpha1.Userland)
	return ok && ul.Status.StoppedReason == v1alpha1.StoppedQueued
}

// queuedSiblings maps a Userland to the queued Userlands of its course.
func (r *UserlandReconciler) queuedSiblings(ctx context.Context, obj client.Object) []ctrl.Request {
	name := obj.GetLabels()[v1alpha1.LabelCourse]
	if name == "" {
		return nil
	}
	return r.userlandsOfCourse(ctx, obj.GetNamespace(), name, true)
}

// courseQueue serialises admission decisions and remembers recent ones,
// so two workers never both take the last place, and a start the cache
// does not show yet still counts.
type courseQueue struct {
	mu     sync.Mutex
	recent map[types.NamespacedName]time.Time
}

// admissionMemory is how long an admission counts as running without the
// cache showing it: far longer than the cache lags, far shorter than a
// start.
const admissionMemory = 30 * time.Second

func (q *courseQueue) admitted(k types.NamespacedName, now time.Time) {
	if q.recent == nil {
		q.recent = map[types.NamespacedName]time.Time{}
	}
	for other, at := range q.recent {
		if now.Sub(at) > admissionMemory {
			delete(q.recent, other)
		}
	}
	q.recent[k] = now
}

func (q *courseQueue) forget(k types.NamespacedName) { delete(q.recent, k) }

func (q *courseQueue) recentlyAdmitted(k types.NamespacedName, now time.Time) bool {
	at, ok := q.recent[k]
	return ok && now.Sub(at) <= admissionMemory
}

// queuedOfCourse maps a course Userland's Deployment to the Userlands of
// the same course waiting in its queue: one stopping frees a place.
func (r *UserlandReconciler) queuedOfCourse(ctx context.Context, obj client.Object) []ctrl.Request {
	ul := r.userlandOfChild(ctx, obj)
	if ul == nil || ul.Labels[v1alpha1.LabelCourse] == "" {
		return nil
	}
	return r.userlandsOfCourse(ctx, ul.Namespace, ul.Labels[v1alpha1.LabelCourse], true)
}

// userlandsOfCourse lists the requests for a course's Userlands, or only
// its queued ones.
func (r *UserlandReconciler) userlandsOfCourse(ctx context.Context, namespace, name string, onlyQueued bool) []ctrl.Request {
	var list v1alpha1.UserlandList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexCourseKey: namespace + "/" + name}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing userlands of course", "course", name)
		return nil
	}
	var reqs []ctrl.Request
	for i := range list.Items {
		if !onlyQueued || list.Items[i].Status.StoppedReason == v1alpha1.StoppedQueued {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}
