package v1alpha1

// Condition types reported on Userlands (all three) and on templates
// (UpToDate).
const (
	// ConditionReady is True when the environment is serving. It is
	// computed once per reconcile from what every step found, so it is
	// False with a reason whenever a step failed.
	ConditionReady = "Ready"
	// ConditionTemplateResolved is True when the referenced template exists.
	ConditionTemplateResolved = "TemplateResolved"
	// ConditionUpToDate is True when the environment runs the current
	// template; on a template, when every one of its environments does.
	ConditionUpToDate = "UpToDate"
)

// Reasons of the TemplateResolved condition.
const (
	// ReasonTemplateNotFound means the referenced template does not exist.
	// Ready is False with it too.
	ReasonTemplateNotFound = "TemplateNotFound"
	// ReasonTemplateFound means the referenced template exists.
	ReasonTemplateFound = "TemplateFound"
)

// Reasons of the UpToDate condition.
const (
	// ReasonRolloutDeferred means a template change waits for the rollout
	// policy.
	ReasonRolloutDeferred = "RolloutDeferred"
	// ReasonRolledOut means the environment runs the current template (on
	// a template: all of its environments do).
	ReasonRolledOut = "RolledOut"
	// ReasonUpdatesPending, on a template, means some of its environments
	// still wait for the current template.
	ReasonUpdatesPending = "UpdatesPending"
)

// Reasons of the Ready condition. Stopped environments carry their
// StoppedReason (Suspended, Idle); a container that cannot start carries
// its waiting reason (the Reason* constants below that Kubernetes defines).
const (
	// ReasonReady means the environment's pod runs the current spec and
	// is available.
	ReasonReady = "Ready"
	// ReasonStarting means the environment's pod is not ready yet.
	ReasonStarting = "Starting"
	// ReasonUnschedulable means no node can run the environment's pod.
	ReasonUnschedulable = "Unschedulable"
	// ReasonNameConflict means a child's name is taken by an object this
	// Userland does not own; nothing is changed until it is removed.
	ReasonNameConflict = "NameConflict"
	// ReasonVolumeConflict means a claim of a volume's name exists that was
	// not made by Userland for this user; it is not mounted.
	ReasonVolumeConflict = "VolumeConflict"
	// ReasonReconcileFailed means a step failed (the API server refused a
	// write, a webhook or quota denied it, a read failed); the message says
	// which, and the controller retries with backoff.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonSuspended means spec.suspend is true (StoppedSuspended).
	ReasonSuspended = string(StoppedSuspended)
	// ReasonIdle means the environment was stopped for inactivity
	// (StoppedIdle).
	ReasonIdle = string(StoppedIdle)
)

// Container waiting reasons, defined by Kubernetes, that the Ready
// condition passes on: the environment cannot start until someone changes
// something.
const (
	ReasonErrImagePull               = "ErrImagePull"
	ReasonImagePullBackOff           = "ImagePullBackOff"
	ReasonInvalidImageName           = "InvalidImageName"
	ReasonCrashLoopBackOff           = "CrashLoopBackOff"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonCreateContainerError       = "CreateContainerError"
	ReasonRunContainerError          = "RunContainerError"
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
