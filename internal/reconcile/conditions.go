package reconcile

import (
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// The kstatus condition types (sigs.k8s.io/cli-utils/pkg/kstatus), which
// kubectl wait, Flux and other tools read to tell an object in progress or
// stuck from a settled one. The API documents them for its kinds as
// v1alpha1.ConditionReconciling and v1alpha1.ConditionStalled; this package
// imports no API types, so it names them again (a test keeps both equal).
const (
	TypeReconciling = "Reconciling"
	TypeStalled     = "Stalled"
)

// MaxMessage bounds a condition's message, in bytes: messages carry error
// text and the words of other components (a kubelet's waiting message),
// which have no length of their own, and every object's status is kept in
// etcd and in every informer's cache.
const MaxMessage = 1024

// Truncate cuts message to MaxMessage bytes, at a character boundary, and
// marks the cut with an ellipsis. A cut inside a character would be
// replaced when the status is encoded, and the status read back would then
// never equal the one computed, which would cost a write every reconcile.
func Truncate(message string) string {
	if len(message) <= MaxMessage {
		return message
	}
	cut := MaxMessage
	for cut > 0 && !utf8.RuneStart(message[cut]) {
		cut--
	}
	return message[:cut] + "…"
}

// Conditions sets the conditions of one object during one reconcile. Every
// condition it sets carries the object's generation as its
// observedGeneration; a transition (a change of status) is stamped with
// the clock's time, and a condition that keeps its status keeps its
// lastTransitionTime (meta.SetStatusCondition).
type Conditions struct {
	list       *[]metav1.Condition
	generation int64
	clock      clock.PassiveClock
}

// NewConditions sets the conditions in list, of an object of the given
// generation, stamping transitions with clk.
func NewConditions(list *[]metav1.Condition, generation int64, clk clock.PassiveClock) Conditions {
	return Conditions{list: list, generation: generation, clock: clk}
}

// Set sets the condition typ, its message truncated to MaxMessage.
func (c Conditions) Set(typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(c.list, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: Truncate(message),
		ObservedGeneration: c.generation,
		LastTransitionTime: metav1.NewTime(c.clock.Now()),
	})
}

// True sets the condition typ to True.
func (c Conditions) True(typ, reason, message string) {
	c.Set(typ, metav1.ConditionTrue, reason, message)
}

// False sets the condition typ to False.
func (c Conditions) False(typ, reason, message string) {
	c.Set(typ, metav1.ConditionFalse, reason, message)
}

// Remove removes the condition typ, if the object has it.
func (c Conditions) Remove(typ string) {
	meta.RemoveStatusCondition(c.list, typ)
}

// Reconciling says, for kstatus, that work toward the spec is in progress:
// Reconciling True, and no Stalled. kstatus's conditions are
// "abnormal-true": present and True only while they apply, and removed,
// never set False, when they do not (Settled).
func (c Conditions) Reconciling(reason, message string) {
	c.Remove(TypeStalled)
	c.True(TypeReconciling, reason, message)
}

// Stalled says, for kstatus, that the object cannot make progress until a
// person changes something (its spec, or an object in its way): Stalled
// True, and no Reconciling.
func (c Conditions) Stalled(reason, message string) {
	c.Remove(TypeReconciling)
	c.True(TypeStalled, reason, message)
}

// Settled says, for kstatus, that the object is neither in progress nor
// stalled: it removes Reconciling and Stalled.
func (c Conditions) Settled() {
	c.Remove(TypeReconciling)
	c.Remove(TypeStalled)
}
