package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TemplateKind is the kind of template a Userland refers to.
// +kubebuilder:validation:Enum=Template;ClusterTemplate
type TemplateKind string

const (
	// TemplateKindTemplate refers to a Template in the Userland's namespace.
	TemplateKindTemplate TemplateKind = "Template"
	// TemplateKindClusterTemplate refers to a cluster-scoped ClusterTemplate.
	TemplateKindClusterTemplate TemplateKind = "ClusterTemplate"
)

// OrDefault is k, or Template when k is empty: the API server defaults
// the kind, but objects built in memory and course entries may leave it
// out. The one place that says so.
func (k TemplateKind) OrDefault() TemplateKind {
	if k == "" {
		return TemplateKindTemplate
	}
	return k
}

// TemplateReference names the template a Userland runs.
type TemplateReference struct {
	// Kind is Template (in the Userland's namespace) or ClusterTemplate.
	// +kubebuilder:default=Template
	// +optional
	Kind TemplateKind `json:"kind,omitempty"`

	// Name of the Template or ClusterTemplate.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="must be a DNS subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
	Name string `json:"name"`
}

// UserlandSpec says whose environment this is and what it runs.
type UserlandSpec struct {
	// User is the identity the gateway authenticates and lets in: an e-mail
	// address, a login name or an OIDC subject, compared exactly. It cannot
	// be changed; create a new Userland for another user.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.matches('[\\\\x00-\\\\x1f\\\\x7f]')",message="must not contain control characters"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="user is immutable; create a new Userland for another user"
	User string `json:"user"`

	// TemplateRef names the Template or ClusterTemplate to run. Changing it
	// is rolled out like a template change.
	TemplateRef TemplateReference `json:"templateRef"`

	// Suspend stops the environment and keeps it stopped, whatever the
	// traffic; its volumes are kept.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// Phase summarises where an environment is in its life.
// +kubebuilder:validation:Enum=Pending;Starting;Ready;Stopped;Failed
type Phase string

const (
	// PhasePending means the environment has not been set up yet, for
	// example because its template does not exist.
	PhasePending Phase = "Pending"
	// PhaseStarting means the environment is scaled up but not yet serving.
	PhaseStarting Phase = "Starting"
	// PhaseReady means the environment is serving.
	PhaseReady Phase = "Ready"
	// PhaseStopped means the environment is scaled to zero; see stoppedReason.
	PhaseStopped Phase = "Stopped"
	// PhaseFailed means the environment cannot start; the Ready condition
	// says why.
	PhaseFailed Phase = "Failed"
)

// StoppedReason says why an environment is stopped.
// +kubebuilder:validation:Enum=Suspended;Idle;NotStarted;Queued;BeforeTerm;TermEnded;Unenrolled;BudgetExhausted
type StoppedReason string

const (
	// StoppedSuspended means spec.suspend is true.
	StoppedSuspended StoppedReason = "Suspended"
	// StoppedIdle means the environment had no traffic for the template's
	// idle timeout. The next request through the gateway wakes it.
	StoppedIdle StoppedReason = "Idle"
	// StoppedNotStarted means a course made the environment ahead of its
	// first use and nobody has opened it yet. The first request through
	// the gateway starts it, as it wakes an idle one.
	StoppedNotStarted StoppedReason = "NotStarted"
	// StoppedQueued means the environment was asked to start but its
	// course's limits.maxRunning is reached; status.queuePosition is its
	// place in line, and it starts when its turn comes.
	StoppedQueued StoppedReason = "Queued"
	// StoppedBeforeTerm means its course's term has not started.
	StoppedBeforeTerm StoppedReason = "BeforeTerm"
	// StoppedTermEnded means its course's term is over.
	StoppedTermEnded StoppedReason = "TermEnded"
	// StoppedUnenrolled means its user is no longer on its course's roster.
	StoppedUnenrolled StoppedReason = "Unenrolled"
	// StoppedBudgetExhausted means its compute-hour budget (its course's
	// limits.budget, or its template's budget) is used up; status.usage
	// says when it resets. It starts again only after that, or once staff
	// grant more (AnnotationBudgetGrant).
	StoppedBudgetExhausted StoppedReason = "BudgetExhausted"
)

// ActivitySource says what kind of use the gateway last recorded.
// +kubebuilder:validation:Enum=Request;WebSocket;KeepRunning
type ActivitySource string

const (
	// ActivityRequest is an HTTP request that counts as use.
	ActivityRequest ActivitySource = "Request"
	// ActivityWebSocket is a WebSocket message from the browser that
	// counts as use.
	ActivityWebSocket ActivitySource = "WebSocket"
	// ActivityKeepRunning is the user's answer to an idle warning.
	ActivityKeepRunning ActivitySource = "KeepRunning"
)

// UserlandStatus is what the controller and the gateway observed.
type UserlandStatus struct {
	// Phase is Pending, Starting, Ready, Stopped or Failed.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Conditions are Ready, TemplateResolved and UpToDate, and, as kstatus
	// reads them, Reconciling while the environment is on its way and
	// Stalled while only a person can unblock it (each present only then).
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// DisplayName is what people call the environment: its template's
	// display name, or the template's name when it has none. The
	// dashboard, the progress page and the plugin show it instead of the
	// object's generated name.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	DisplayName string `json:"displayName,omitempty"`

	// URL is where the user opens the environment through the gateway.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	URL string `json:"url,omitempty"`

	// LastActivityTime is when the gateway last saw traffic for the
	// environment, recorded at most about once a minute.
	// +optional
	LastActivityTime *metav1.Time `json:"lastActivityTime,omitempty"`

	// LastActivitySource says what the last activity was: Request (a
	// request that counts, such as opening a page), WebSocket (a message
	// the browser sent, such as typing or running a cell) or KeepRunning
	// (the user answered an idle warning).
	// +optional
	LastActivitySource ActivitySource `json:"lastActivitySource,omitempty"`

	// IdleStopTime is when the environment will be stopped for idleness
	// unless someone uses it. It is set only within the template's
	// idle.warnBefore of that time.
	// +optional
	IdleStopTime *metav1.Time `json:"idleStopTime,omitempty"`

	// StoppedReason is Suspended or Idle while the phase is Stopped.
	// +optional
	StoppedReason StoppedReason `json:"stoppedReason,omitempty"`

	// QueuePosition is the environment's place in its course's queue
	// (1 is next) while it is stopped as Queued.
	// +optional
	QueuePosition int32 `json:"queuePosition,omitempty"`

	// Usage is the environment's use of its compute-hour budget; absent
	// when no budget applies.
	// +optional
	Usage *UsageStatus `json:"usage,omitempty"`

	// UpdatePending is true while a template change waits for the rollout
	// policy to allow it.
	// +optional
	UpdatePending bool `json:"updatePending,omitempty"`

	// ObservedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Userland is one user's environment: who it belongs to and which template
// it runs. Its name names the environment's Service, so it must be a DNS-1035
// label (hack/crdpatch adds that rule to the CRD).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ul,categories=userland-all
// +kubebuilder:printcolumn:name="Display",type=string,JSONPath=`.status.displayName`
// +kubebuilder:printcolumn:name="User",type=string,JSONPath=`.spec.user`
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.templateRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Last Used",type=date,JSONPath=`.status.lastActivityTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Userland struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the user and the template.
	Spec UserlandSpec `json:"spec"`
	// Status is observed state.
	// +optional
	Status UserlandStatus `json:"status,omitzero"`
}

// UserlandList is a list of Userlands.
// +kubebuilder:object:root=true
type UserlandList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Userlands.
	Items []Userland `json:"items"`
}
