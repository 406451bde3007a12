package controller

import (
	"time"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// IdleInput is what the idle decision depends on.
type IdleInput struct {
	// Now is the controller clock's time.
	Now time.Time
	// Timeout is the template's idle timeout; nil means never stop.
	Timeout *time.Duration
	// LastActivity is status.lastActivityTime, written by the gateway.
	LastActivity *time.Time
	// StartedAt is when the environment was last scaled up.
	StartedAt time.Time
	// IdleStoppedAt is set while the environment is stopped for idleness.
	IdleStoppedAt *time.Time
	// WarnBefore is how long before the stop users are warned (0: not).
	WarnBefore time.Duration
}

// IdleDecision says whether the environment should run.
type IdleDecision struct {
	// Running is true when the environment should have a pod.
	Running bool
	// Stop is true when it becomes idle now (an event and a metric).
	Stop bool
	// Wake is true when activity after an idle stop starts it again.
	Wake bool
	// StopAt is the idle deadline while within WarnBefore of it: users
	// are being warned.
	StopAt *time.Time
	// RequeueAfter is the time left until the warning or the deadline,
	// or zero.
	RequeueAfter time.Duration
}

// DecideIdle applies the idle rules: stop once the later of the last
// activity and the start is older than the timeout; warn WarnBefore ahead;
// wake on activity no older than the stop. Waiting is expressed as the exact
// time to the warning or the deadline.
func DecideIdle(in IdleInput) IdleDecision {
	if in.IdleStoppedAt != nil {
		// Not Before, rather than After: both times have whole seconds,
		// so activity in the second of the stop (someone back at once)
		// compares equal. Activity from before the stop is older than it
		// by the whole timeout, so it cannot wake by mistake.
		if in.LastActivity != nil && !in.LastActivity.Before(*in.IdleStoppedAt) {
			return IdleDecision{Running: true, Wake: true}
		}
		return IdleDecision{}
	}
	if in.Timeout == nil {
		return IdleDecision{Running: true}
	}
	lastActive := in.StartedAt
	if in.LastActivity != nil && in.LastActivity.After(lastActive) {
		lastActive = *in.LastActivity
	}
	deadline := lastActive.Add(*in.Timeout)
	if !in.Now.Before(deadline) {
		return IdleDecision{Stop: true}
	}
	if warn := deadline.Add(-in.WarnBefore); in.WarnBefore > 0 && in.Now.Before(warn) {
		return IdleDecision{Running: true, RequeueAfter: warn.Sub(in.Now)}
	} else if in.WarnBefore > 0 {
		return IdleDecision{Running: true, StopAt: &deadline, RequeueAfter: deadline.Sub(in.Now)}
	}
	return IdleDecision{Running: true, RequeueAfter: deadline.Sub(in.Now)}
}

// DefaultWarnBefore is how long before an idle stop users are warned when
// the template does not say.
const DefaultWarnBefore = 5 * time.Minute

// WarnBefore is a template's warning time: its own or the default, and
// never more than half the timeout (a warning from the first minute on
// would be noise).
func WarnBefore(spec *v1alpha1.IdleSpec) time.Duration {
	if spec == nil {
		return 0
	}
	warn := DefaultWarnBefore
	if spec.WarnBefore != nil {
		warn = spec.WarnBefore.Duration
	}
	return max(0, min(warn, spec.Timeout.Duration/2))
}

// RolloutInput is what the rollout decision depends on.
type RolloutInput struct {
	// Policy is the template's rollout policy.
	Policy v1alpha1.RolloutPolicy
	// Outdated is true when the Deployment runs an older pod template.
	Outdated bool
	// WasRunning is true when the Deployment currently has a replica.
	WasRunning bool
	// Running is true when the environment should have a pod now.
	Running bool
	// Now is the controller clock's time.
	Now time.Time
	// LastActive is the later of the last activity and the start.
	LastActive time.Time
	// IdleAfter is how long without activity counts as idle for WhenIdle.
	IdleAfter time.Duration
	// BudgetAvailable is true when an Immediate restart stays within the
	// template's maxUnavailable.
	BudgetAvailable bool
}

// RolloutDecision says whether the current template is applied now.
type RolloutDecision struct {
	// Apply is true when the Deployment gets the current pod template.
	Apply bool
	// Restart is true when applying restarts a running environment.
	Restart bool
	// RequeueAfter is when a WhenIdle rollout becomes due, or zero.
	RequeueAfter time.Duration
}

// DecideRollout applies the rollout policies. A change never waits when it
// costs nothing: the environment is stopped, stays stopped, or is starting
// anyway.
func DecideRollout(in RolloutInput) RolloutDecision {
	if !in.Outdated {
		return RolloutDecision{Apply: true}
	}
	if !in.WasRunning || !in.Running {
		return RolloutDecision{Apply: true}
	}
	switch in.Policy {
	case v1alpha1.RolloutImmediate:
		if in.BudgetAvailable {
			return RolloutDecision{Apply: true, Restart: true}
		}
		// Waiting on siblings becoming available, not on time: their
		// Deployment events requeue this Userland.
		return RolloutDecision{}
	case v1alpha1.RolloutOnRestart:
		return RolloutDecision{}
	default: // WhenIdle
		due := in.LastActive.Add(in.IdleAfter)
		if !in.Now.Before(due) {
			return RolloutDecision{Apply: true, Restart: true}
		}
		return RolloutDecision{RequeueAfter: due.Sub(in.Now)}
	}
}
