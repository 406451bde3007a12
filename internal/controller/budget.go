package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/course"
)

// budgetOf is the budget that governs an environment running pod at now,
// nil when none does: its course's for a student (staff are exempt, as
// from the term), else its template's for an environment outside a
// course. A course governs its environments alone: without a budget of
// its own, its template's does not apply to them.
func budgetOf(ul *v1alpha1.Userland, tmpl *v1alpha1.TemplateSpec, c *v1alpha1.Course, role course.Role, pod *corev1.PodSpec, now time.Time) *budget.Budget {
	spec, termStart, _ := course.BudgetFor(c, ul, tmpl)
	if spec == nil {
		return nil
	}
	b := budget.For(*spec, termStart, pod, ul.Annotations[v1alpha1.AnnotationBudgetGrant], now)
	return &b
}

// IndexBudgetGroupKey indexes cached Userlands by the budget they share
// (course.BudgetGroup): a student's environments of one course.
const IndexBudgetGroupKey = "userland.dev/budget-group"

// IndexUserlandByBudgetGroup is the indexer function for
// IndexBudgetGroupKey.
func IndexUserlandByBudgetGroup(obj client.Object) []string {
	ul, ok := obj.(*v1alpha1.Userland)
	if !ok {
		return nil
	}
	if g := course.BudgetGroup(ul); g != "" {
		return []string{g}
	}
	return nil
}

// budgetSharers is the usage of the student's other environments of the
// course, which draw on the same budget; nil unless a course's budget
// governs s.ul. They are read from the cache, not copied, and only read.
func (r *UserlandReconciler) budgetSharers(ctx context.Context, s *reconcileState) ([]*v1alpha1.UsageStatus, error) {
	if !course.BudgetGoverns(s.course, s.ul) {
		return nil, nil
	}
	var list v1alpha1.UserlandList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexBudgetGroupKey: course.BudgetGroup(s.ul)}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the environments sharing %s/%s's budget: %w", s.ul.Namespace, s.ul.Name, err)
	}
	return course.NewBudgetSharing(course.Pointers(list.Items), course.OneCourse(s.course)).Of(s.ul), nil
}

// budgetSharersOf maps a Userland whose usage changed to the others that
// share its budget.
func (r *UserlandReconciler) budgetSharersOf(ctx context.Context, obj client.Object) []ctrl.Request {
	ul, ok := obj.(*v1alpha1.Userland)
	if !ok || course.BudgetGroup(ul) == "" {
		return nil
	}
	var list v1alpha1.UserlandList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexBudgetGroupKey: course.BudgetGroup(ul)}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the environments sharing a budget", "userland", client.ObjectKeyFromObject(ul))
		return nil
	}
	var out []ctrl.Request
	for i := range list.Items {
		if list.Items[i].Name != ul.Name {
			out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// usageChanged passes updates that change what a Userland draws from its
// budget: a start, a stop, a grant, a rollover, a new weight.
var usageChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, okBefore := e.ObjectOld.(*v1alpha1.Userland)
		after, okAfter := e.ObjectNew.(*v1alpha1.Userland)
		if !okBefore || !okAfter || after.Status.Usage == nil {
			return false
		}
		return !equality.Semantic.DeepEqual(before.Status.Usage, after.Status.Usage)
	},
}

// decideBudget stops an environment whose budget is used up, or keeps a
// stopped one from starting, with reason BudgetExhausted; it runs before
// the course's rules, so a course's own reason (the term, the roster)
// wins, and an exhausted start never takes a place under maxRunning. A
// running one is requeued for the exact instant it runs out, and an
// exhausted one for its reset.
func decideBudget(d *RunDecision, in RunInput, idleStoppedAt *time.Time) {
	if in.Budget == nil {
		return
	}
	// The usage as of now, the run so far included, before deciding.
	sofar := budget.Advance(in.usage, *in.Budget, in.Now, d.WasRunning)
	exhausted := budget.Pool(sofar, in.SharedWith, in.Now).Remaining <= 0
	switch {
	case exhausted && d.Running:
		d.Running, d.StopReason, d.WarnStopAt, d.Woken = false, v1alpha1.StoppedBudgetExhausted, nil, false
		d.BudgetExhausted = d.WasRunning
		stoppedAt := in.Now
		if idleStoppedAt != nil && !d.WasRunning {
			stoppedAt = *idleStoppedAt
		}
		// Stopped as if idle: once the budget allows again, it starts
		// when its user next asks, not by itself at the reset.
		d.Annotations[AnnotationIdleStoppedAt] = stamp(stoppedAt)
	case exhausted && (d.StopReason == v1alpha1.StoppedIdle || d.StopReason == v1alpha1.StoppedNotStarted):
		// Stopped anyway, but what the user must be told is the budget.
		d.StopReason = v1alpha1.StoppedBudgetExhausted
	}
	if exhausted && !in.Budget.Period.End.IsZero() {
		d.RequeueAfter = soonest(d.RequeueAfter, in.Budget.Period.End.Sub(in.Now))
	}
}

// settleUsage is the usage to persist once the run is decided, and the
// requeue for a running environment's exhaustion or rollover.
func settleUsage(d *RunDecision, in RunInput) {
	if in.Budget == nil {
		return
	}
	d.Usage = budget.Advance(in.usage, *in.Budget, in.Now, d.Running)
	if !d.Running {
		return
	}
	if at := budget.PoolExhaustedAt(d.Usage, in.SharedWith, in.Now); !at.IsZero() {
		// Exactly when it runs out, at least a second on (the deadline
		// has whole seconds; Remaining is 0 there).
		d.RequeueAfter = soonest(d.RequeueAfter, max(at.Sub(in.Now), time.Second))
	}
	if end := in.Budget.Period.End; !end.IsZero() {
		// The rollover: a running environment's usage restarts at zero.
		d.RequeueAfter = soonest(d.RequeueAfter, max(end.Sub(in.Now), time.Second))
	}
}

// usageAsRun is u, the persisted usage, unless the Deployment runs (it
// had a replica, started at startedAt) while u says nothing runs: the
// status write that recorded the start failed or was lost (a value the
// schema refuses, the API server down), while the Deployment's was made.
// The run then counts from the Deployment's start stamp, at the budget's
// weight; counting from now would start it afresh at every reconcile, and
// an environment whose status cannot be written would never run out.
func usageAsRun(u *v1alpha1.UsageStatus, b *budget.Budget, wasRunning bool, startedAt *time.Time) *v1alpha1.UsageStatus {
	if u == nil || b == nil || u.RunningSince != nil || !wasRunning || startedAt == nil {
		return u
	}
	out := u.DeepCopy()
	since := metav1.NewTime(startedAt.Truncate(time.Second))
	if since.Before(&u.PeriodStart) {
		since = u.PeriodStart
	}
	out.RunningSince, out.WeightMilli = &since, b.WeightMilli
	return out
}

// recordUsage publishes the decided usage in status, with an event when
// the budget ran out or staff granted more.
func (r *UserlandReconciler) recordUsage(s *reconcileState, d RunDecision) {
	before := s.ul.Status.Usage
	s.ul.Status.Usage = d.Usage
	if d.BudgetExhausted {
		r.Recorder.Eventf(s.ul, nil, corev1.EventTypeNormal, v1alpha1.ReasonBudgetExhausted, "Stop",
			"stopped: the compute-hour budget is used up (%s)", describeReset(d.Usage))
	}
	if d.Usage != nil && d.Usage.GrantedSeconds > 0 && (before == nil || !before.PeriodStart.Equal(&d.Usage.PeriodStart) ||
		before.GrantedSeconds != d.Usage.GrantedSeconds) {
		r.Recorder.Eventf(s.ul, nil, corev1.EventTypeNormal, "BudgetGranted", "Grant",
			"%s: %s extra this period in all", grantedBy(d.Usage.GrantedBy), hours(d.Usage.GrantedSeconds))
	}
}

func describeReset(u *v1alpha1.UsageStatus) string {
	if at := budget.ResetAt(u); !at.IsZero() {
		return "it resets at " + at.UTC().Format(time.RFC3339)
	}
	return "it lasts the term; ask the course staff for more"
}

func grantedBy(by string) string {
	if by == "" {
		return "extra hours"
	}
	return by + " granted extra hours"
}

func hours(seconds int64) string {
	return (time.Duration(seconds) * time.Second).String()
}
