package v1alpha1

// What links a Userland to a Course, and who may set it.
//
// A Userland's course link is its LabelCourse, its AnnotationEnrolledBy
// and its AnnotationProvisionedByCourse. Only a requester allowed the
// custom verb VerbEnroll on the course (resource "courses", group
// userland.dev, the course's name, in the Userland's namespace) may set,
// change or remove any of them; the validating webhook asks the API server
// with a SubjectAccessReview. The controller's and the gateway's
// ClusterRoles hold it; course managers do not, so editing a Course never
// moves somebody else's environment into it.
const (
	// VerbEnroll is the RBAC verb on courses that lets a requester link a
	// Userland to that course.
	VerbEnroll = "enroll"

	// AnnotationProvisionedByCourse, on a Userland, is the UID of the
	// Course that created it (the controller for listed users, the
	// gateway at sign-in). Only such environments are the course's to
	// retire, and only those made for students are reachable by the
	// course's staff. A Userland that carries LabelCourse without it (one
	// an earlier version adopted into a course, or one a course of the
	// same name made before it was deleted and created again) is still
	// held to the course's term, but neither staff nor retirement touch it.
	AnnotationProvisionedByCourse = "userland.dev/provisioned-by-course"
)

// Reasons of the Course conditions about access.
const (
	// ReasonClaimOfUserland, on SharedVolumesReady and Ready, means a
	// shared volume names a claim that belongs to a Userland (a person's
	// data); it is not mounted in any environment of the course.
	ReasonClaimOfUserland = "ClaimOfUserland"
	// ReasonSnapshotMismatch, on Ready, means a volume snapshot of the
	// final name exists that the course did not take of that claim after
	// its term (another source claim, no course label, or taken before the
	// term ended). The environment is not deleted until it is removed.
	ReasonSnapshotMismatch = "SnapshotMismatch"
)
