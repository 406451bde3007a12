package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BudgetPeriod is how often a compute-hour budget starts afresh.
// +kubebuilder:validation:Enum=Week;Term
type BudgetPeriod string

const (
	// BudgetWeek resets every Monday at 00:00 UTC. UTC, not a course's
	// session time zone: one instant for every course, so a rollover is
	// one predictable burst of writes, and the page states the reset time
	// in the reader's own zone anyway.
	BudgetWeek BudgetPeriod = "Week"
	// BudgetTerm never resets: one budget from term.start to term.end.
	// Only a course has a term.
	BudgetTerm BudgetPeriod = "Term"
)

// BudgetWeighting says what an hour of running costs.
// +kubebuilder:validation:Enum=None;CPU
type BudgetWeighting string

const (
	// WeightingNone counts wall-clock hours of running.
	WeightingNone BudgetWeighting = "None"
	// WeightingCPU counts CPU-hours: running hours times the CPU the
	// environment's pod requests (its containers' requests, else their
	// limits, else one CPU).
	WeightingCPU BudgetWeighting = "CPU"
)

// BudgetSpec is a compute-hour budget for each student (on a course) or
// each environment (on a template). A running environment whose budget
// runs out is stopped (stoppedReason BudgetExhausted) and does not start
// again until the period resets or staff grant more.
type BudgetSpec struct {
	// Hours is what each student may use per period: wall-clock hours, or
	// CPU-hours with weighting CPU.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Hours int32 `json:"hours"`

	// Period is Week (the default: resets every Monday 00:00 UTC) or Term
	// (courses only: one budget for the whole term).
	// +kubebuilder:default=Week
	// +optional
	Period BudgetPeriod `json:"period,omitempty"`

	// Weighting is None (the default: hours of running) or CPU (CPU-hours:
	// hours times the pod's CPU request).
	// +kubebuilder:default=None
	// +optional
	Weighting BudgetWeighting `json:"weighting,omitempty"`
}

// UsageStatus is an environment's use of its budget. The controller
// writes it only when the environment starts or stops, when a period
// rolls over and when the budget or a grant changes; while it runs, what
// it has used is computed on read: usedSeconds + (now - runningSince) x
// weightMilli/1000.
type UsageStatus struct {
	// PeriodStart is when the period counted here began.
	PeriodStart metav1.Time `json:"periodStart"`

	// PeriodEnd is when it resets; absent for a term budget.
	// +optional
	PeriodEnd *metav1.Time `json:"periodEnd,omitempty"`

	// UsedSeconds are the (weighted) seconds used in the period before
	// runningSince.
	// +kubebuilder:validation:Minimum=0
	UsedSeconds int64 `json:"usedSeconds"`

	// LimitSeconds is the period's budget in (weighted) seconds, grants
	// not included.
	// +kubebuilder:validation:Minimum=0
	LimitSeconds int64 `json:"limitSeconds"`

	// GrantedSeconds are extra (weighted) seconds staff granted for this
	// period (AnnotationBudgetGrant).
	// +kubebuilder:validation:Minimum=0
	// +optional
	GrantedSeconds int64 `json:"grantedSeconds,omitempty"`

	// GrantedBy is who the grant names, as the webhook admitted it.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	GrantedBy string `json:"grantedBy,omitempty"`

	// RunningSince is when the current run began to count: the later of
	// its start and periodStart. Absent while stopped. It survives a
	// controller restart, so no running time is lost.
	// +optional
	RunningSince *metav1.Time `json:"runningSince,omitempty"`

	// WeightMilli is what one second of the current run costs, in
	// thousandths: 1000 without weighting, the pod's milli-CPU with CPU.
	// +kubebuilder:validation:Minimum=0
	// +optional
	WeightMilli int64 `json:"weightMilli,omitempty"`
}

// Grants of extra budget.
//
// Staff grant a student more hours for the current period by setting
// AnnotationBudgetGrant on the student's Userland. Only a requester
// allowed the custom verb VerbGrant on the course (resource "courses",
// group userland.dev, the course's name, in the Userland's namespace) may
// set or change it; the validating webhook asks the API server with a
// SubjectAccessReview. Being listed as staff in the Course is a role, not
// this permission. For an environment outside a course the verb is asked
// on the Userland itself (resource "userlands", its name).
const (
	// VerbGrant is the RBAC verb that lets a requester grant budget.
	VerbGrant = "grant"

	// AnnotationBudgetGrant holds the extra hours granted for one period:
	// "<periodStart RFC 3339>=<hours>[;<granted by>]", e.g.
	// "2026-11-23T00:00:00Z=3;teacher". A grant for an earlier period
	// counts for nothing.
	AnnotationBudgetGrant = "userland.dev/budget-grant"
)
