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

// The kstatus conditions (sigs.k8s.io/cli-utils/pkg/kstatus), reported on
// Userlands and Courses, which kubectl wait, Flux and other tools read to
// tell an object in progress or stuck from a settled one. They follow
// kstatus's "abnormal-true" convention: each is present, and True, only
// while it applies, and is removed, never set False, when it does not; an
// object with neither is settled (its Ready says how it is). Both are
// computed with Ready, from the same findings, so neither costs a status
// write of its own.
const (
	// ConditionReconciling is True while the controller, or the cluster
	// for it, is still working toward the spec: an environment starting
	// (or whose pod cannot start yet), a template or shared claim awaited,
	// a step that failed and is retried with backoff. Its reason is
	// ReasonProgressing or ReasonProgressingWithRetry; its message is
	// Ready's.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the object cannot make progress until
	// a person changes something: its spec, or an object of someone else's
	// in its way. Its reason and message are Ready's (NameConflict,
	// VolumeConflict, NamespaceNotAllowed on a Userland, whose phase is
	// then Failed; ClaimOfUserland, ClaimNotShareable, SnapshotMismatch on
	// a Course). The controller does not retry it; a change to the object,
	// or to what it refers to, reconciles it again.
	ConditionStalled = "Stalled"
)

// Reasons of the Reconciling condition.
const (
	// ReasonProgressing means the work goes on: the environment is
	// starting, or something it needs is awaited.
	ReasonProgressing = "Progressing"
	// ReasonProgressingWithRetry means a step failed (Ready says which,
	// with ReasonReconcileFailed) and the controller retries with backoff.
	ReasonProgressingWithRetry = "ProgressingWithRetry"
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
	// ReasonNotStarted means a course made the environment and nobody has
	// opened it yet (StoppedNotStarted).
	ReasonNotStarted = string(StoppedNotStarted)
	// ReasonQueued means the course's running limit holds the environment
	// back (StoppedQueued).
	ReasonQueued = string(StoppedQueued)
	// ReasonBeforeTerm means the course's term has not started
	// (StoppedBeforeTerm).
	ReasonBeforeTerm = string(StoppedBeforeTerm)
	// ReasonTermEnded means the course's term is over (StoppedTermEnded).
	ReasonTermEnded = string(StoppedTermEnded)
	// ReasonUnenrolled means the user left the course's roster
	// (StoppedUnenrolled).
	ReasonUnenrolled = string(StoppedUnenrolled)
	// ReasonBudgetExhausted means the compute-hour budget is used up
	// (StoppedBudgetExhausted).
	ReasonBudgetExhausted = string(StoppedBudgetExhausted)
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
	// LabelUserlandUID is the UID of the Userland whose pod carries it,
	// and its Service selects by it too: a Userland deleted and created
	// again under its name (for another user) must not select the earlier
	// one's pods, which carry the same LabelUserland until the garbage
	// collector removes them, and which a ReplicaSet of the earlier one
	// may still be making.
	LabelUserlandUID = "userland.dev/userland-uid"
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
	// LabelCourse, on a Userland, names the Course (in the same namespace)
	// it was made for: kubectl get ul -l userland.dev/course=<name>.
	LabelCourse = "userland.dev/course"
	// AnnotationEnrolledBy, on a course's Userland, says which roster
	// entry admitted its user: "student-user", "student-group:<group>",
	// "student-domain:<domain>", "staff-user" or "staff-group:<group>".
	// A group's members cannot be listed, so the entry is how the
	// controller tells later whether the user is still on the roster.
	AnnotationEnrolledBy = "userland.dev/enrolled-by"
)

// Condition types reported on Courses, beside Ready.
const (
	// ConditionTemplatesResolved is True when every template of the course
	// exists.
	ConditionTemplatesResolved = "TemplatesResolved"
	// ConditionSharedVolumesReady is True when every shared claim exists,
	// is bound and can be mounted on many nodes at once.
	ConditionSharedVolumesReady = "SharedVolumesReady"
)

// Reasons of the Course conditions.
const (
	// ReasonTemplatesFound means every template of the course exists.
	ReasonTemplatesFound = "TemplatesFound"
	// ReasonClaimsBound means every shared claim is bound and shareable.
	ReasonClaimsBound = "ClaimsBound"
	// ReasonClaimNotFound means a shared claim does not exist.
	ReasonClaimNotFound = "ClaimNotFound"
	// ReasonClaimNotBound means a shared claim is not bound to a volume.
	ReasonClaimNotBound = "ClaimNotBound"
	// ReasonClaimNotShareable means a shared claim is ReadWriteOnce (or
	// ReadWriteOncePod): environments on other nodes cannot mount it.
	ReasonClaimNotShareable = "ClaimNotShareable"
	// ReasonSnapshotsPending means environments due for deletion wait for
	// their volume snapshots to be ready.
	ReasonSnapshotsPending = "SnapshotsPending"
	// ReasonCourseReady means the course has all it needs.
	ReasonCourseReady = "CourseReady"
)
