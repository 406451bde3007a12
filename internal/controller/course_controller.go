package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
}

// courseState is what the phases of one course reconcile share.
type courseState struct {
	c   *v1alpha1.Course
	now time.Time
	// userlands are the course's, from the cache (read-only).
	userlands []v1alpha1.Userland
	// missing are the course's templates that do not exist.
	missing []v1alpha1.TemplateReference
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
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !current.DeletionTimestamp.IsZero() {
		// Its Userlands are not owned by it: they become plain ones.
		return ctrl.Result{}, nil
	}
	s := &courseState{c: current.DeepCopy(), now: r.Clock.Now()}
	defer func() {
		r.summarizeCourse(s, retErr)
		if retErr == nil {
			s.c.Status.ObservedGeneration = s.c.Generation
		}
		if equality.Semantic.DeepEqual(current.Status, s.c.Status) {
			return
		}
		if err := r.Client.Status().Patch(ctx, s.c, client.MergeFrom(&current)); err != nil && !apierrors.IsNotFound(err) {
			retErr = errors.Join(retErr, fmt.Errorf("patching status of course %s: %w", req, err))
		}
	}()
	phases := []func(context.Context, *courseState) (ctrl.Result, error){
		r.listUserlands,
		r.resolveCourseTemplates,
		r.checkSharedVolumes,
		r.provisionRoster,
		r.retire,
		r.countStudents,
	}
	for _, phase := range phases {
		res, err := phase(ctx, s)
		if err != nil {
			return ctrl.Result{}, err
		}
		result = reconcile.LowestRequeue(result, res)
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
		_, err := templates.ResolveRef(ctx, r.Client, s.c.Namespace, course.Ref(t))
		switch {
		case apierrors.IsNotFound(err):
			s.missing = append(s.missing, course.Ref(t))
		case err != nil:
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// summarizeCourse sets the conditions from what the phases found.
func (r *CourseReconciler) summarizeCourse(s *courseState, err error) {
	set := func(typ string, ok bool, reason, message string) {
		status := metav1.ConditionTrue
		if !ok {
			status = metav1.ConditionFalse
		}
		meta.SetStatusCondition(&s.c.Status.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: message,
			ObservedGeneration: s.c.Generation, LastTransitionTime: metav1.NewTime(s.now),
		})
	}
	if len(s.missing) > 0 {
		names := make([]string, len(s.missing))
		for i, ref := range s.missing {
			names[i] = fmt.Sprintf("%s %q", ref.Kind, ref.Name)
		}
		set(v1alpha1.ConditionTemplatesResolved, false, v1alpha1.ReasonTemplateNotFound,
			fmt.Sprintf("%s does not exist; students get the other templates", joinWords(names)))
	} else {
		set(v1alpha1.ConditionTemplatesResolved, true, v1alpha1.ReasonTemplatesFound, "every template of the course exists")
	}
	if s.volumeProblem != nil {
		set(v1alpha1.ConditionSharedVolumesReady, false, s.volumeProblem.reason, s.volumeProblem.message)
	} else {
		set(v1alpha1.ConditionSharedVolumesReady, true, v1alpha1.ReasonClaimsBound, "every shared claim is bound and can be mounted on many nodes")
	}
	switch {
	case err != nil:
		set(v1alpha1.ConditionReady, false, v1alpha1.ReasonReconcileFailed, truncate(err.Error()))
	case len(s.missing) > 0:
		set(v1alpha1.ConditionReady, false, v1alpha1.ReasonTemplateNotFound, "a template of the course is missing (see TemplatesResolved)")
	case s.volumeProblem != nil:
		set(v1alpha1.ConditionReady, false, s.volumeProblem.reason, s.volumeProblem.message)
	case s.snapshotMismatch != nil:
		set(v1alpha1.ConditionReady, false, s.snapshotMismatch.reason, s.snapshotMismatch.message)
	case s.waiting != "":
		set(v1alpha1.ConditionReady, false, v1alpha1.ReasonSnapshotsPending, s.waiting)
	default:
		set(v1alpha1.ConditionReady, true, v1alpha1.ReasonCourseReady, "the course has everything it needs")
	}
}

func truncate(s string) string {
	if len(s) > maxFailureMessage {
		return s[:maxFailureMessage] + "…"
	}
	return s
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
		Watches(&v1alpha1.Template{}, handler.EnqueueRequestsFromMapFunc(r.coursesIn(true)),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		Watches(&v1alpha1.ClusterTemplate{}, handler.EnqueueRequestsFromMapFunc(r.coursesIn(false)),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
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
