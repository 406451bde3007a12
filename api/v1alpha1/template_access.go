package v1alpha1

// What a template may make the controller do, and where.
//
// A Template or ClusterTemplate names Secrets and ServiceAccounts that the
// controller puts into every environment's pod. The validating webhook
// admits a template only when its requester may do that themselves: the
// verb VerbGet on each Secret and the custom verb VerbUse on each
// ServiceAccount (resource "serviceaccounts", core group, by name), in the
// Template's namespace, or cluster-wide for a ClusterTemplate. An update is
// asked only about the references it adds.
//
// A ClusterTemplate's allowedNamespaces is enforced by the controller on
// every reconcile, not only when a Userland is admitted: an environment in
// a namespace the selector does not match (the template appeared after the
// Userland, the selector was tightened, the namespace lost a label) does
// not run. Its Deployment is scaled to zero, its volumes are kept, its
// phase is Failed and its Ready condition is False with
// ReasonNamespaceNotAllowed; it starts again once the namespace is allowed.
const (
	// VerbUse is the RBAC verb on serviceaccounts that lets a template
	// author run environments as that ServiceAccount.
	VerbUse = "use"

	// ReasonNamespaceNotAllowed, on Ready, means the Userland's
	// ClusterTemplate does not allow its namespace (allowedNamespaces);
	// the message names the selector.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
)
