package v1alpha1

// Condition types reported on Userlands.
const (
	// ConditionReady is True when the environment is serving.
	ConditionReady = "Ready"
	// ConditionTemplateResolved is True when the referenced template exists.
	ConditionTemplateResolved = "TemplateResolved"
	// ConditionUpToDate is True when the environment runs the current
	// template.
	ConditionUpToDate = "UpToDate"
)

// Condition reasons.
const (
	// ReasonTemplateNotFound means the referenced template does not exist.
	ReasonTemplateNotFound = "TemplateNotFound"
	// ReasonTemplateFound means the referenced template exists.
	ReasonTemplateFound = "TemplateFound"
	// ReasonRolloutDeferred means a template change waits for the rollout
	// policy.
	ReasonRolloutDeferred = "RolloutDeferred"
	// ReasonRolledOut means the environment runs the current template.
	ReasonRolledOut = "RolledOut"
)

// Labels and annotations Userland puts on the objects it manages.
const (
	// LabelManagedBy is the standard label every child carries.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is LabelManagedBy's value on Userland's children.
	ManagedByValue = "userland"
	// LabelUserland names the Userland a child belongs to.
	LabelUserland = "userland.dev/userland"
	// AnnotationRestartedAt, set on a Userland (by the dashboard, the
	// kubectl plugin or by hand) to a new value such as the current time,
	// restarts its environment now onto the current template, whatever the
	// rollout policy: it is how a pending update is applied on request.
	// Like kubectl rollout restart, the value is copied to the pod template.
	// An RFC 3339 time also counts as activity, so it starts an
	// idle-stopped environment.
	AnnotationRestartedAt = "userland.dev/restarted-at"
	// AnnotationSuspendedBy says who set spec.suspend: "owner" when the
	// environment's own user stopped it from the dashboard; anything else
	// (absent included: kubectl, GitOps, an admin or instructor) is staff.
	// An owner may lift only their own suspension.
	AnnotationSuspendedBy = "userland.dev/suspended-by"
	// SuspendedByOwner is AnnotationSuspendedBy's value for an owner's stop.
	SuspendedByOwner = "owner"
	// SuspendedByStaff is AnnotationSuspendedBy's value for a staff stop.
	SuspendedByStaff = "staff"
)
