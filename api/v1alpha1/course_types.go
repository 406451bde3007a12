package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CourseSpec is one class: who studies, who teaches, what they get, for
// which term and within which limits.
type CourseSpec struct {
	// DisplayName is what people call the course, e.g. "Databases 2026".
	// Control characters are refused: kubectl would print them to a
	// terminal, which would obey them.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="!self.matches('[\\\\x00-\\\\x1f\\\\x7f]')",message="must not contain control characters"
	// +optional
	DisplayName string `json:"displayName,omitempty"`

	// Term is when students may use their environments.
	Term CourseTerm `json:"term"`

	// Students are who is enrolled: listed users, members of
	// identity-provider groups and holders of e-mail addresses in the
	// domains. Listed users get up-front templates at once; the others
	// when they first sign in, since nobody can list a group's members
	// ahead of time.
	// +optional
	Students AutoProvisionSpec `json:"students,omitzero"`

	// Staff are the instructors and assistants: they reach every student
	// environment of the course, see the course page, mount shared volumes
	// read-write, and are exempt from the term and the running limit.
	// +optional
	Staff CourseStaff `json:"staff,omitzero"`

	// Templates are what each student gets.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=name
	Templates []CourseTemplate `json:"templates"`

	// SharedVolumes are course material: existing claims in the course's
	// namespace mounted read-only into students' environments and
	// read-write into staff's. Every environment of the course mounts
	// them, on every node, so the claim must be ReadWriteMany or
	// ReadOnlyMany; the SharedVolumesReady condition says when it is not.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.mountPath == a.mountPath))",message="mountPath must be unique across shared volumes"
	// +optional
	SharedVolumes []SharedVolume `json:"sharedVolumes,omitempty"`

	// Limits bound what the course's students use.
	// +optional
	Limits CourseLimits `json:"limits,omitzero"`

	// Lifecycle says what happens after the term.
	// +optional
	Lifecycle CourseLifecycle `json:"lifecycle,omitzero"`

	// Schedule is the course's timetable: before each session the
	// environments of its students are started (warmed), so they are
	// ready when class begins.
	// +optional
	Schedule *CourseSchedule `json:"schedule,omitempty"`
}

// CourseSchedule is a course's timetable and how it warms environments
// before each session.
type CourseSchedule struct {
	// Sessions are the classes: each weekly (day) or on one date (date).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Sessions []CourseSession `json:"sessions"`

	// Exceptions are dates (YYYY-MM-DD, in each session's own time zone)
	// with no session, such as holidays.
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:Format=date
	// +kubebuilder:validation:items:MaxLength=10
	// +listType=set
	// +optional
	Exceptions []string `json:"exceptions,omitempty"`

	// Warmup is how long before each session's start its environments
	// are started (default 10m, at most 2h; 0s warms none).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) <= duration('2h')",message="must be a duration of at most 2h, such as 10m"
	// +kubebuilder:default="10m"
	// +optional
	Warmup *metav1.Duration `json:"warmup,omitempty"`

	// WarmPercent is the share of the course's student environments
	// warmed, the most recently used first (default 100: all of them).
	// limits.maxRunning bounds it as it bounds any start.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	WarmPercent *int32 `json:"warmPercent,omitempty"`

	// Placeholders is how many low-priority pods hold room on the
	// cluster from each session's warm-up to its end, so a cluster
	// autoscaler adds nodes before class; students' pods preempt them
	// (default 0). Each asks for what one of the course's templates asks
	// and runs where it may run, the templates in turn.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=200
	// +optional
	Placeholders *int32 `json:"placeholders,omitempty"`

	// PullImages has the images of the course's templates pulled onto
	// every node that can run them, from each session's warm-up to its
	// end (default true; false pulls nothing ahead).
	// +optional
	PullImages *bool `json:"pullImages,omitempty"`
}

// CourseSession is one class of a course's timetable: weekly on a day, or
// once on a date, from start to end (local times, the same day) in an
// IANA time zone.
// +kubebuilder:validation:XValidation:rule="has(self.day) != has(self.date)",message="exactly one of day (weekly) or date (once) must be set"
// +kubebuilder:validation:XValidation:rule="self.end > self.start",message="must be after start",fieldPath=".end"
type CourseSession struct {
	// Day makes the session weekly, on this day.
	// +optional
	Day *Weekday `json:"day,omitempty"`

	// Date makes it a single session, on this date (YYYY-MM-DD).
	// +kubebuilder:validation:Format=date
	// +kubebuilder:validation:MaxLength=10
	// +optional
	Date *string `json:"date,omitempty"`

	// Start is the local time it begins, HH:MM (24 hours).
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	Start string `json:"start"`

	// End is the local time it ends, HH:MM, after start on the same day.
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	End string `json:"end"`

	// TimeZone is an IANA time zone name, such as Europe/Berlin or
	// Asia/Tokyo; the webhook refuses names it does not know.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`
	TimeZone string `json:"timeZone"`
}

// Weekday is a day of the week.
// +kubebuilder:validation:Enum=Monday;Tuesday;Wednesday;Thursday;Friday;Saturday;Sunday
type Weekday string

// CourseTerm is the teaching period. Before start students cannot start
// their environments; at end they are stopped.
// +kubebuilder:validation:XValidation:rule="self.end > self.start",message="must be after term.start",fieldPath=".end"
type CourseTerm struct {
	// Start is when students may first start environments (RFC 3339,
	// e.g. 2026-09-01T00:00:00Z).
	// +kubebuilder:validation:Format=date-time
	Start metav1.Time `json:"start"`
	// End is when every student environment is stopped.
	// +kubebuilder:validation:Format=date-time
	End metav1.Time `json:"end"`
}

// CourseStaff are a course's instructors and teaching assistants.
type CourseStaff struct {
	// Users are identities as the gateway sees them, without control
	// characters.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:XValidation:rule="!self.matches('[\\\\x00-\\\\x1f\\\\x7f]')",message="must not contain control characters"
	// +listType=set
	// +optional
	Users []string `json:"users,omitempty"`

	// Groups are identity-provider groups whose members are staff, without
	// control characters.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:XValidation:rule="!self.matches('[\\\\x00-\\\\x1f\\\\x7f]')",message="must not contain control characters"
	// +listType=set
	// +optional
	Groups []string `json:"groups,omitempty"`
}

// ProvisionMode says when a course's students get an environment.
// +kubebuilder:validation:Enum=UpFront;OnSignIn
type ProvisionMode string

const (
	// ProvisionUpFront creates the environment (stopped, with its volumes)
	// for every listed student as soon as they are on the roster.
	ProvisionUpFront ProvisionMode = "UpFront"
	// ProvisionOnSignIn creates it when the student first signs in.
	ProvisionOnSignIn ProvisionMode = "OnSignIn"
)

// CourseTemplate is one template the course's students get.
type CourseTemplate struct {
	// Kind is Template (in the course's namespace) or ClusterTemplate.
	// +kubebuilder:default=Template
	// +optional
	Kind TemplateKind `json:"kind,omitempty"`

	// Name of the Template or ClusterTemplate.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="must be a DNS subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
	Name string `json:"name"`

	// Provision is UpFront or OnSignIn (the default).
	// +kubebuilder:default=OnSignIn
	// +optional
	Provision ProvisionMode `json:"provision,omitempty"`
}

// SharedVolume mounts an existing claim into every environment of the
// course.
type SharedVolume struct {
	// Name names the volume in the pod (course-<name>).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=50
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Label().validate(self).hasValue()",message="must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit"
	Name string `json:"name"`

	// ClaimName is a PersistentVolumeClaim in the course's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName"`

	// MountPath is the absolute path it is mounted at in every container.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="must be an absolute path"
	MountPath string `json:"mountPath"`
}

// CourseLimits bound a course's use of the cluster.
type CourseLimits struct {
	// MaxRunning is the most student environments of the course running
	// at once. Those started beyond it wait, with their place in the
	// queue on the progress page, and start as others stop.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxRunning *int32 `json:"maxRunning,omitempty"`

	// PerStudent caps each student environment's pod as a whole (cpu,
	// memory): it becomes the pod's resource limit, and no container may
	// ask for more.
	// +kubebuilder:validation:MaxProperties=2
	// +kubebuilder:validation:XValidation:rule="self.all(k, k == 'cpu' || k == 'memory')",message="only cpu and memory can be capped"
	// +kubebuilder:validation:XValidation:rule="self.all(k, quantity(self[k]).isGreaterThan(quantity('0')))",message="caps must be positive"
	// +optional
	PerStudent corev1.ResourceList `json:"perStudent,omitempty"`

	// Budget is each student's compute hours per week or per term; staff
	// are exempt. It is the student's, not each environment's: a student
	// with two of the course's templates has one budget for both, and
	// hours granted on either count for both.
	// +optional
	Budget *BudgetSpec `json:"budget,omitempty"`
}

// CourseLifecycle says what happens to students' environments after the
// term.
type CourseLifecycle struct {
	// Retention is how long after term.end students' Userlands are kept
	// (stopped) before they are deleted; their claims are then kept or
	// deleted by each template volume's reclaimPolicy. Unset: kept until
	// someone deletes them.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$')",message="must be a duration such as 720h"
	// +optional
	Retention *metav1.Duration `json:"retention,omitempty"`

	// VolumeSnapshotClassName, when set, has a VolumeSnapshot of every
	// claim of a student environment taken, and ready, before the
	// environment is deleted.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	VolumeSnapshotClassName *string `json:"volumeSnapshotClassName,omitempty"`
}

// CoursePhase is where a course is in its term.
// +kubebuilder:validation:Enum=Upcoming;InTerm;Ended;Retired
type CoursePhase string

const (
	// CourseUpcoming is before term.start.
	CourseUpcoming CoursePhase = "Upcoming"
	// CourseInTerm is between term.start and term.end.
	CourseInTerm CoursePhase = "InTerm"
	// CourseEnded is after term.end, within the retention.
	CourseEnded CoursePhase = "Ended"
	// CourseRetired is after the retention: students' environments are
	// deleted.
	CourseRetired CoursePhase = "Retired"
)

// CourseStatus reports on a course's students.
type CourseStatus struct {
	// ObservedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase is Upcoming, InTerm, Ended or Retired.
	// +optional
	Phase CoursePhase `json:"phase,omitempty"`

	// Conditions are Ready, TemplatesResolved and SharedVolumesReady, and,
	// as kstatus reads them, Reconciling while the course is on its way and
	// Stalled while only a person can unblock it (each present only then).
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Enrolled counts students: those listed, and those who signed in
	// through a group or e-mail domain of the course.
	// +optional
	Enrolled int32 `json:"enrolled"`

	// Provisioned counts students with every template of the course.
	// +optional
	Provisioned int32 `json:"provisioned"`

	// Running counts student environments that are running or starting.
	// +optional
	Running int32 `json:"running"`

	// Ready counts student environments that are serving.
	// +optional
	Ready int32 `json:"ready"`

	// Queued counts student environments waiting for limits.maxRunning.
	// +optional
	Queued int32 `json:"queued"`

	// NextSession is the session of spec.schedule in progress, or else
	// the next one within the term; absent when none is left.
	// +optional
	NextSession *CourseSessionStatus `json:"nextSession,omitempty"`
}

// CourseSessionStatus is one session of a course's timetable.
type CourseSessionStatus struct {
	// Start is when it begins.
	Start metav1.Time `json:"start"`
	// End is when it ends.
	End metav1.Time `json:"end"`
	// Warm counts student environments running (or starting) for it,
	// from its warm-up to its end; 0 before its warm-up.
	Warm int32 `json:"warm"`
	// Images says on how many nodes the course's images are pulled, from
	// its warm-up to its end (absent otherwise, or with pullImages false).
	// +optional
	Images *CourseImagesStatus `json:"images,omitempty"`
}

// Course is one class: a roster of students and staff, the templates they
// get, shared course material, the term and its limits. Userlands made for
// it carry the label userland.dev/course=<name>.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=crs,categories=userland-all
// +kubebuilder:printcolumn:name="Display",type=string,JSONPath=`.spec.displayName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Enrolled",type=integer,JSONPath=`.status.enrolled`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.running`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Queued",type=integer,JSONPath=`.status.queued`,priority=1
// +kubebuilder:printcolumn:name="Next Session",type=string,JSONPath=`.status.nextSession.start`,priority=1
// +kubebuilder:printcolumn:name="Warm",type=integer,JSONPath=`.status.nextSession.warm`,priority=1
// +kubebuilder:printcolumn:name="Start",type=string,JSONPath=`.spec.term.start`,priority=1
// +kubebuilder:printcolumn:name="End",type=string,JSONPath=`.spec.term.end`
type Course struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the roster, templates, term and limits.
	Spec CourseSpec `json:"spec"`
	// Status is observed state.
	// +optional
	Status CourseStatus `json:"status,omitzero"`
}

// CourseList is a list of Courses.
// +kubebuilder:object:root=true
type CourseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Courses.
	Items []Course `json:"items"`
}

// CourseImagesStatus counts the nodes the image pullers of a course run
// on: a node is ready when every image of the templates it can run is
// pulled there.
type CourseImagesStatus struct {
	// Ready counts nodes with every image pulled.
	Ready int32 `json:"ready"`
	// Desired counts nodes that can run one of the course's templates.
	Desired int32 `json:"desired"`
}
