package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/reconcile"
	"github.com/userland-dev/userland/internal/templates"
)

// +kubebuilder:rbac:groups=userland.dev,resources=courses,verbs=get;list;watch
// +kubebuilder:rbac:groups=userland.dev,resources=courses/status,verbs=patch
// +kubebuilder:rbac:groups=userland.dev,resources=userlands,verbs=create;patch;delete
// +kubebuilder:rbac:groups=snapshot.storage.k8s.io,resources=volumesnapshots,verbs=get;create

// courseStatusBatch gathers Userland changes before their course is
// recounted, as templateStatusBatch does for templates.
const courseStatusBatch = 5 * time.Second

// CourseReconciler provisions a course's roster, retires it after the
// term and keeps its status. What an environment of the course may do
// (term, queue, shared volumes, caps) is the Userland reconciler's.
type CourseReconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// APIReader reads what the cache does not hold: shared claims (the
	// cache holds only Userland's own) and volume snapshots.
	APIReader client.Reader
	// Recorder emits Events on Courses.
	Recorder recorder.EventRecorder
	// Clock is injected so term dates are tested without waiting.
	Clock clock.PassiveClock
	// Room configures placeholders and image pullers.
	Room RoomOptions

	// status writes Courses' status; SetupWithManager makes it.
	status *reconcile.StatusPatcher[*v1alpha1.Course, v1alpha1.CourseStatus]
}

// courseState is what the phases of one course reconcile share.
type courseState struct {
	c *v1alpha1.Course
	// conditions sets c's conditions.
	conditions reconcile.Conditions
	now        time.Time
	// userlands are the course's, from the cache (read-only).
	userlands []v1alpha1.Userland
	// missing are the course's templates that do not exist.
	missing []v1alpha1.TemplateReference
	// templates are the course's templates that exist, in spec order.
	templates []courseTemplate
	// holdRoom: a session's warm-up has begun and it has not ended, in
	// term: placeholders and image pullers are wanted.
	holdRoom bool
	// volumeProblem is the first shared claim problem found.
	volumeProblem *finding
	// waiting says what retirement waits for.
	waiting string
	// snapshotMismatch is the first final snapshot retirement refused.
	snapshotMismatch *finding
}

// Reconcile runs the course phases and writes status once.
func (r *CourseReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	var current v1alpha1.Course
	if err := r.Client.Get(ctx, req.NamespacedName, &current); err != nil {
		if apierrors.IsNotFound(err) {
			r.status.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !current.DeletionTimestamp.IsZero() {
		r.status.Forget(req.NamespacedName)
		// Its Userlands are not owned by it: they become plain ones.
		return ctrl.Result{}, nil
	}
	s := &courseState{c: current.DeepCopy(), now: r.Clock.Now()}
	s.conditions = reconcile.NewConditions(&s.c.Status.Conditions, s.c.Generation, r.Clock)
	defer func() {
		r.summarizeCourse(s, retErr)
		if retErr == nil {
			s.c.Status.ObservedGeneration = s.c.Generation
		}
		if err := r.status.Patch(ctx, &current, s.c); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	// No course phase stops the others: each finding is reported and the
	// rest goes on.
	result, _, err := reconcile.Run(ctx, s,
		r.listUserlands,
		r.resolveCourseTemplates,
		r.checkSharedVolumes,
		r.provisionRoster,
		r.retire,
		r.countStudents,
		r.schedule,
		r.holdRoomForSession,
	)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.c.Status.Phase = course.PhaseAt(s.c, s.now)
	return reconcile.LowestRequeue(result, ctrl.Result{RequeueAfter: course.NextChange(s.c, s.now)}), nil
}

func (r *CourseReconciler) listUserlands(ctx context.Context, s *courseState) (ctrl.Result, error) {
	var list v1alpha1.UserlandList
	key := s.c.Namespace + "/" + s.c.Name
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexCourseKey: key}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing userlands of course %s: %w", key, err)
	}
	s.userlands = list.Items
	return ctrl.Result{}, nil
}

// resolveCourseTemplates notes the templates that do not exist; the
// others are provisioned regardless.
func (r *CourseReconciler) resolveCourseTemplates(ctx context.Context, s *courseState) (ctrl.Result, error) {
	for _, t := range s.c.Spec.Templates {
		resolved, err := templates.ResolveRef(ctx, r.Client, s.c.Namespace, course.Ref(t))
		switch {
		case apierrors.IsNotFound(err):
			s.missing = append(s.missing, course.Ref(t))
		case err != nil:
			return ctrl.Result{}, err
		default:
			s.templates = append(s.templates, courseTemplate{key: resolved.Key, spec: resolved.Spec})
		}
	}
	return ctrl.Result{}, nil
}

// summarizeCourse sets the conditions from what the phases found.
func (r *CourseReconciler) summarizeCourse(s *courseState, err error) {
	if len(s.missing) > 0 {
		names := make([]string, len(s.missing))
		for i, ref := range s.missing {
			names[i] = fmt.Sprintf("%s %q", ref.Kind, ref.Name)
		}
		s.conditions.False(v1alpha1.ConditionTemplatesResolved, v1alpha1.ReasonTemplateNotFound,
			fmt.Sprintf("%s does not exist; students get the other templates", joinWords(names)))
	} else {
		s.conditions.True(v1alpha1.ConditionTemplatesResolved, v1alpha1.ReasonTemplatesFound, "every template of the course exists")
	}
	if s.volumeProblem != nil {
		s.conditions.False(v1alpha1.ConditionSharedVolumesReady, s.volumeProblem.reason, s.volumeProblem.message)
	} else {
		s.conditions.True(v1alpha1.ConditionSharedVolumesReady, v1alpha1.ReasonClaimsBound, "every shared claim is bound and can be mounted on many nodes")
	}
	status, reason, message := courseReadiness(s, err)
	s.conditions.Set(v1alpha1.ConditionReady, status, reason, message)
	// kstatus's conditions follow Ready's finding, with Ready's message,
	// so they change only when Ready does and cost no write of their own.
	switch {
	case err != nil:
		s.conditions.Reconciling(v1alpha1.ReasonProgressingWithRetry, message)
	case status == metav1.ConditionTrue:
		s.conditions.Settled()
	case courseStalls[reason]:
		s.conditions.Stalled(reason, message)
	default:
		s.conditions.Reconciling(v1alpha1.ReasonProgressing, message)
	}
}

// courseReadiness is the course's Ready condition for what the phases
// found, in order of precedence: a failed step, a missing template, a
// shared claim problem, a snapshot in the way, snapshots awaited.
func courseReadiness(s *courseState, err error) (metav1.ConditionStatus, string, string) {
	switch {
	case err != nil:
		return metav1.ConditionFalse, v1alpha1.ReasonReconcileFailed, reconcile.Truncate(err.Error())
	case len(s.missing) > 0:
		return metav1.ConditionFalse, v1alpha1.ReasonTemplateNotFound, "a template of the course is missing (see TemplatesResolved)"
	case s.volumeProblem != nil:
		return metav1.ConditionFalse, s.volumeProblem.reason, s.volumeProblem.message
	case s.snapshotMismatch != nil:
		return metav1.ConditionFalse, s.snapshotMismatch.reason, s.snapshotMismatch.message
	case s.waiting != "":
		return metav1.ConditionFalse, v1alpha1.ReasonSnapshotsPending, s.waiting
	default:
		return metav1.ConditionTrue, v1alpha1.ReasonCourseReady, "the course has everything it needs"
	}
}

// courseStalls are the reasons of a course that is not Ready that only a
// person can clear (kstatus's Stalled): a shared claim the course must not
// or cannot share, a snapshot of someone else's in the way. The others (a
// template or claim that does not exist yet, a claim not bound yet,
// snapshots not ready yet) are awaited, and the course is in progress.
var courseStalls = map[string]bool{
	v1alpha1.ReasonClaimOfUserland:   true,
	v1alpha1.ReasonClaimNotShareable: true,
	v1alpha1.ReasonSnapshotMismatch:  true,
}

func joinWords(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	out := items[0]
	for _, it := range items[1 : len(items)-1] {
		out += ", " + it
	}
	return out + " and " + items[len(items)-1]
}

// SetupWithManager registers the course reconciler. Course spec changes
// reconcile at once; Userland changes are gathered for courseStatusBatch.
func (r *CourseReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.status = reconcile.NewStatusPatcher(r.Client, "course", func(c *v1alpha1.Course) *v1alpha1.CourseStatus { return &c.Status })
	enqueue := func(obj client.Object, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
		if name := obj.GetLabels()[v1alpha1.LabelCourse]; name != "" {
			q.AddAfter(ctrl.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}, courseStatusBatch)
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("course").
		For(&v1alpha1.Course{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.Userland{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
				enqueue(e.Object, q)
			},
			UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
				enqueue(e.ObjectOld, q)
				enqueue(e.ObjectNew, q)
			},
			DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
				enqueue(e.Object, q)
			},
		}).
		// Placeholders: created, deleted, preempted or failed (a pod's
		// other updates, scheduling and starting, change nothing here).
		Owns(&corev1.Pod{}, builder.WithPredicates(placeholderChanged)).
		// Pullers: their status is the course's status.nextSession.images,
		// gathered for courseStatusBatch as Userland changes are (a
		// hundred nodes pulling report a hundred times).
		Watches(&appsv1.DaemonSet{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
				enqueueOwner(e.Object, q)
			},
			UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
				enqueueOwner(e.ObjectNew, q)
			},
			DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
				enqueueOwner(e.Object, q)
			},
		}).
		Watches(&v1alpha1.Template{}, handler.EnqueueRequestsFromMapFunc(r.coursesIn(true)),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		Watches(&v1alpha1.ClusterTemplate{}, handler.EnqueueRequestsFromMapFunc(r.coursesIn(false)),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		WithOptions(controller.Options{RateLimiter: retryLimiter()}).
		Complete(r)
}

// coursesIn maps a template appearing or going to the courses that may
// use it: those of its namespace, or every course for a ClusterTemplate.
func (r *CourseReconciler) coursesIn(namespaced bool) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []ctrl.Request {
		var list v1alpha1.CourseList
		var opts []client.ListOption
		if namespaced {
			opts = append(opts, client.InNamespace(obj.GetNamespace()))
		}
		if err := r.Client.List(ctx, &list, opts...); err != nil {
			return nil
		}
		reqs := make([]ctrl.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
}

// placeholderChanged passes a placeholder's creation and deletion, and an
// update that puts it on its way out (deleted, failed, succeeded).
var placeholderChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		pod, ok := e.ObjectNew.(*corev1.Pod)
		if !ok || !isRoomChild(pod) {
			return false
		}
		return pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
	},
}

// enqueueOwner queues, after courseStatusBatch, the Course that controls
// obj.
func enqueueOwner(obj client.Object, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
	if ref := metav1.GetControllerOf(obj); ref != nil && ref.Kind == "Course" && ref.APIVersion == v1alpha1.GroupVersion.String() {
		q.AddAfter(ctrl.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}, courseStatusBatch)
	}
}
