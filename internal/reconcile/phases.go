// Package reconcile is the kit every reconciler of Userland is built on: a
// runner of small ordered phases that knows a stall from an error, one
// status patcher that writes nothing for a status that did not change, and
// one way to set conditions, kstatus's Reconciling and Stalled among them.
//
// It is a leaf: it uses the API machinery, k8s.io/utils and
// controller-runtime, never a package of Userland's, so each reconciler
// keeps its own rules and the kit only their shape.
package reconcile

import (
	"context"
	"errors"

	ctrl "sigs.k8s.io/controller-runtime"
)

// Stop is what a phase returns, as its error, to end the phases early
// without failing: the queue must not retry with backoff, because
// retrying now cannot help; a change to the object, or to an object it
// watches, brings the next reconcile.
type Stop struct {
	// Reason (CamelCase) and Message (plain words) say why, for the
	// conditions.
	Reason, Message string
	// Stalled is true when only a person can unblock the object (an
	// invalid spec, an object of someone else's in the way): kstatus's
	// Stalled. Otherwise the phases wait for something a watch reports,
	// such as a referenced object appearing, and the object is still in
	// progress.
	Stalled bool
}

func (s *Stop) Error() string {
	if s.Stalled {
		return "stalled: " + s.Reason + ": " + s.Message
	}
	return "waiting: " + s.Reason + ": " + s.Message
}

// Stalled ends the phases: the spec cannot succeed as it is.
func Stalled(reason, message string) error {
	return &Stop{Reason: reason, Message: message, Stalled: true}
}

// Waiting ends the phases until something a watch reports happens.
func Waiting(reason, message string) error {
	return &Stop{Reason: reason, Message: message}
}

// Phase is one step of a reconcile, over the state S its phases share. It
// returns the requeue it needs, and an error to end the phases: a *Stop
// (Stalled, Waiting), or any other error, which is transient and retried
// with backoff.
type Phase[S any] func(ctx context.Context, s S) (ctrl.Result, error)

// Run runs the phases in order over s and merges their results: the
// soonest RequeueAfter wins (LowestRequeue). The first phase that returns
// an error ends the run, and the result is then empty: on a *Stop, Run
// returns it as stop and a nil error; on any other error, that error, and
// the queue's backoff decides when to retry.
func Run[S any](ctx context.Context, s S, phases ...Phase[S]) (result ctrl.Result, stop *Stop, err error) {
	for _, phase := range phases {
		res, err := phase(ctx, s)
		if errors.As(err, &stop) {
			return ctrl.Result{}, stop, nil
		}
		if err != nil {
			return ctrl.Result{}, nil, err
		}
		result = LowestRequeue(result, res)
	}
	return result, nil, nil
}

// LowestRequeue merges two results: the soonest non-zero RequeueAfter wins.
func LowestRequeue(a, b ctrl.Result) ctrl.Result {
	if b.RequeueAfter > 0 && (a.RequeueAfter == 0 || b.RequeueAfter < a.RequeueAfter) {
		a.RequeueAfter = b.RequeueAfter
	}
	return a
}
