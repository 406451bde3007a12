package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TemplateSpec describes what runs in every Userland that refers to the
// template. Template and ClusterTemplate share it, so both validate alike.
// +kubebuilder:validation:XValidation:rule="!has(self.podTemplate.spec) || !has(self.podTemplate.spec.containers) || size(self.podTemplate.spec.containers) == 0 || self.podTemplate.spec.containers.exists(c, has(c.ports) && c.ports.exists(p, p.containerPort == self.http.port))",message="must equal the containerPort of a container in podTemplate",fieldPath=".http.port"
// +kubebuilder:validation:XValidation:rule="!has(self.volumes) || !has(self.podTemplate.spec) || !has(self.podTemplate.spec.containers) || size(self.podTemplate.spec.containers) == 0 || self.volumes.all(v, !has(v.containers) || v.containers.all(n, self.podTemplate.spec.containers.exists(c, c.name == n)))",message="every name in volumes[].containers must be a container of podTemplate",fieldPath=".volumes"
type TemplateSpec struct {
	// DisplayName is the name people see in the dashboard and in
	// kubectl userland, e.g. "VS Code". Control characters are refused: a
	// terminal would obey them.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="!self.matches('[\\\\x00-\\\\x1f\\\\x7f]')",message="must not contain control characters"
	// +optional
	DisplayName string `json:"displayName,omitempty"`

	// Description tells users what the environment offers.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`

	// PodTemplate is the pod every Userland runs: one or more containers, for
	// example phpMyAdmin beside MariaDB. The controller adds the per-user
	// volumes, identity environment variables and labels. A template
	// without a container is refused here, at the containers, rather than
	// at spec.http.port, which no container could then serve.
	// +kubebuilder:validation:XValidation:rule="has(self.spec) && has(self.spec.containers) && size(self.spec.containers) > 0",message="must list at least one container",fieldPath=".spec.containers"
	PodTemplate corev1.PodTemplateSpec `json:"podTemplate"`

	// HTTP says where the environment serves its web UI and how the gateway
	// routes to it.
	HTTP HTTPSpec `json:"http"`

	// Volumes are persistent volumes created once per user, named
	// <userland>-<volume>, and kept or deleted per reclaimPolicy.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.mountPath == a.mountPath))",message="mountPath must be unique across volumes"
	// +optional
	Volumes []VolumeSpec `json:"volumes,omitempty"`

	// Idle stops environments nobody has used for a while. When absent,
	// environments are never stopped for idleness.
	// +optional
	Idle *IdleSpec `json:"idle,omitempty"`

	// Rollout controls how a change to this template reaches existing
	// Userlands.
	// +kubebuilder:default={}
	// +optional
	Rollout RolloutSpec `json:"rollout,omitzero"`

	// AutoProvision lists who may get a Userland from this template at first
	// sign-in. When absent, nobody self-provisions.
	// +optional
	AutoProvision *AutoProvisionSpec `json:"autoProvision,omitempty"`

	// Network limits what the environment's pods may reach. Ingress is
	// always limited to the gateway. Egress is Internet unless this says
	// Unrestricted: absent, the API server fills in network: {egress:
	// Internet}. Enforcement needs a CNI that implements NetworkPolicy.
	// +kubebuilder:default={}
	// +optional
	Network *NetworkSpec `json:"network,omitempty"`

	// Budget is each environment's compute hours per week, for
	// environments outside a course (a course's limits.budget governs its
	// own). Only Week applies: a template has no term.
	// +kubebuilder:validation:XValidation:rule="!has(self.period) || self.period == 'Week'",message="a template's budget resets weekly; Term needs a course (limits.budget)",fieldPath=".period"
	// +optional
	Budget *BudgetSpec `json:"budget,omitempty"`
}

// Egress is what an environment's pods may connect to.
// +kubebuilder:validation:Enum=Unrestricted;Internet
type Egress string

const (
	// EgressUnrestricted leaves egress to the cluster's own policies: the
	// controller writes no egress rules, so cloud metadata is reachable
	// unless the cluster blocks it. Opt in only for environments that must
	// reach other pods or the nodes.
	EgressUnrestricted Egress = "Unrestricted"
	// EgressInternet (the default) allows DNS to the cluster's DNS pods and
	// public addresses only: private, shared, loopback and link-local
	// ranges (other pods, the gateway, the API server) and cloud metadata
	// (MetadataCIDRs) are denied, apart from allowedCIDRs, which never
	// include cloud metadata either.
	EgressInternet Egress = "Internet"
)

// MetadataCIDRs are link-local ranges and the cloud metadata and platform
// endpoints that hand out node or workload credentials: 169.254.169.254
// (AWS, GCP, Azure, OpenStack...) in 169.254.0.0/16, Azure's WireServer
// 168.63.129.16, Alibaba's 100.100.100.200, and the IPv6 endpoints of AWS
// (fd00:ec2::254) and GCP (fd20:ce::254). No egress rule the controller
// writes admits them, and allowedCIDRs may not lie within them.
var MetadataCIDRs = []string{
	"169.254.0.0/16", "168.63.129.16/32", "100.100.100.200/32",
	"fe80::/10", "fd00:ec2::254/128", "fd20:ce::254/128",
}

// EgressOf is the egress mode of a template's network: Internet when the
// field is unset, as the API server defaults it.
func EgressOf(n *NetworkSpec) Egress {
	if n == nil || n.Egress == "" {
		return EgressInternet
	}
	return n.Egress
}

// NetworkSpec limits an environment's network.
// +kubebuilder:validation:XValidation:rule="!has(self.allowedCIDRs) || self.egress == 'Internet'",message="allowedCIDRs need egress Internet",fieldPath=".allowedCIDRs"
type NetworkSpec struct {
	// Egress is Internet (the default: DNS to the cluster's DNS pods and
	// public addresses only, never a private, link-local or cloud metadata
	// address) or Unrestricted (no egress rules: the cluster's own
	// policies decide, cloud metadata included).
	// +kubebuilder:default=Internet
	// +optional
	Egress Egress `json:"egress,omitempty"`

	// AllowedCIDRs are further destinations, on any port, that Internet
	// egress admits, e.g. a campus database at 10.20.0.0/16. None may lie
	// within link-local or cloud metadata addresses, and those inside a
	// wider network (0.0.0.0/0, say) stay closed.
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +optional
	AllowedCIDRs []CIDR `json:"allowedCIDRs,omitempty"`
}

// CIDR is an IPv4 or IPv6 network in CIDR notation, e.g. 10.20.0.0/16.
// +kubebuilder:validation:MaxLength=43
// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self) == cidr(self).masked()",message="must be a network in CIDR notation with no host bits set, e.g. 10.20.0.0/16"
// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || !['169.254.0.0/16', '168.63.129.16/32', '100.100.100.200/32', 'fe80::/10', 'fd00:ec2::254/128', 'fd20:ce::254/128'].exists(m, cidr(m).containsCIDR(self))",message="must not lie within link-local or cloud metadata addresses (169.254.0.0/16, 168.63.129.16/32, 100.100.100.200/32, fe80::/10, fd00:ec2::254/128, fd20:ce::254/128)"
type CIDR string

// Routing is how the gateway addresses an environment.
// +kubebuilder:validation:Enum=Path;Subdomain
type Routing string

const (
	// RoutingPath serves an environment under /u/<namespace>/<name>/.
	RoutingPath Routing = "Path"
	// RoutingSubdomain serves an environment at <name>--<namespace>.<base domain>.
	RoutingSubdomain Routing = "Subdomain"
)

// HTTPSpec says where the environment serves its web UI.
type HTTPSpec struct {
	// Port is the container port serving the UI. It must be the containerPort
	// of a container in podTemplate.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// Routing is Path (/u/<namespace>/<name>/ on the main host, sharing its
	// origin with the dashboard and every other environment) or Subdomain
	// (the environment's own host under the installation's environment
	// domain, its own origin). Unset: Subdomain where the installation has
	// an environment domain, else Path.
	// +optional
	Routing Routing `json:"routing,omitempty"`

	// StripPrefix removes the /u/<namespace>/<name> prefix before the request
	// reaches the environment (the original is sent as X-Forwarded-Prefix).
	// Set it to false for apps that are configured with a base path, such as
	// JupyterLab's base_url. Only meaningful with Path routing.
	// +kubebuilder:default=true
	// +optional
	StripPrefix *bool `json:"stripPrefix,omitempty"`
}

// ReclaimPolicy says what happens to a user's volume when their Userland is
// deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type ReclaimPolicy string

const (
	// ReclaimRetain keeps the PersistentVolumeClaim, labelled and without an
	// owner, so a returning Userland with the same name and user adopts it.
	ReclaimRetain ReclaimPolicy = "Retain"
	// ReclaimDelete deletes the PersistentVolumeClaim with the Userland.
	ReclaimDelete ReclaimPolicy = "Delete"
)

// VolumeSpec is one persistent volume per user.
type VolumeSpec struct {
	// Name names the volume; the claim is called <userland>-<name>.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Label().validate(self).hasValue()",message="must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit"
	Name string `json:"name"`

	// MountPath is the absolute path the volume is mounted at.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="must be an absolute path"
	MountPath string `json:"mountPath"`

	// Containers names the containers that mount the volume. When absent,
	// every container mounts it.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	Containers []string `json:"containers,omitempty"`

	// Size is the requested capacity. Growing it later resizes the claim
	// where the storage class allows; shrinking it is never applied.
	// +kubebuilder:default="1Gi"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// StorageClassName picks the storage class. When absent, the cluster's
	// default class is used.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// AccessModes of the claim.
	// +kubebuilder:default={"ReadWriteOnce"}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:Enum=ReadWriteOnce;ReadOnlyMany;ReadWriteMany;ReadWriteOncePod
	// +listType=set
	// +optional
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`

	// ReclaimPolicy is Retain (keep the user's data when the Userland is
	// deleted) or Delete.
	// +kubebuilder:default=Retain
	// +optional
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`
}

// IdleSpec stops environments that have had no traffic for a while.
type IdleSpec struct {
	// Timeout is how long an environment may go without traffic through the
	// gateway before it is stopped, e.g. "30m" or "2h". At least one minute.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$')",message="must be a duration such as 30m or 1h30m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('1m')",message="must be at least 1m"
	Timeout metav1.Duration `json:"timeout"`

	// WarnBefore is how long before an idle stop the user is told: the
	// Userland's status.idleStopTime is set, an IdleStopSoon event is
	// recorded and the dashboard shows a notice with a button that keeps
	// the environment running. Any activity that counts cancels it.
	// Defaults to 5m, and never more than half the timeout.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$')",message="must be a duration such as 5m"
	// +optional
	WarnBefore *metav1.Duration `json:"warnBefore,omitempty"`

	// Activity says which traffic means a person is using the environment.
	// When absent every request counts, and on WebSockets every message
	// the browser sends that carries data; pings, pongs and what the
	// environment sends never count. The samples carry presets for VS
	// Code, Jupyter and phpMyAdmin.
	// +optional
	Activity *ActivitySpec `json:"activity,omitempty"`
}

// ActivitySpec tells traffic an open, untouched page makes by itself
// (polls, keepalives, latency probes) from traffic a person makes.
type ActivitySpec struct {
	// IgnorePaths are path prefixes, as the environment sees them, of the
	// app's background reads: GET and HEAD requests (WebSocket opens
	// included) whose path starts with one of them do not count. Requests
	// with any other method always count: apps write when a person acts.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^/`
	// +listType=atomic
	// +optional
	IgnorePaths []string `json:"ignorePaths,omitempty"`

	// WebSocket says which WebSocket messages from the browser count.
	// +optional
	WebSocket *WebSocketActivitySpec `json:"webSocket,omitempty"`
}

// WebSocketActivitySpec filters the messages a browser sends on a
// WebSocket. The gateway reads only frame headers, and with IgnoreMessages
// the first 256 bytes of each message; it asks the environment not to
// compress messages (permessage-deflate) when IgnoreMessages is set, since
// compressed bytes cannot be matched.
type WebSocketActivitySpec struct {
	// MinMessageBytes: messages with fewer payload bytes do not count
	// (an app's fixed-size keepalives and acknowledgements).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65536
	// +optional
	MinMessageBytes int32 `json:"minMessageBytes,omitempty"`

	// IgnoreMessages are RE2 regular expressions matched against the first
	// 256 bytes of each message; a message that matches any does not count
	// (an app's latency probes and heartbeats).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	// +optional
	IgnoreMessages []string `json:"ignoreMessages,omitempty"`
}

// RolloutPolicy says when a template change reaches a running environment.
// +kubebuilder:validation:Enum=Immediate;WhenIdle;OnRestart
type RolloutPolicy string

const (
	// RolloutImmediate restarts running environments now, at most
	// maxUnavailable of them at a time.
	RolloutImmediate RolloutPolicy = "Immediate"
	// RolloutWhenIdle applies the change once an environment is stopped or
	// has had no activity for a while.
	RolloutWhenIdle RolloutPolicy = "WhenIdle"
	// RolloutOnRestart applies the change at the environment's next start.
	RolloutOnRestart RolloutPolicy = "OnRestart"
)

// RolloutSpec controls how template changes reach existing Userlands.
type RolloutSpec struct {
	// Policy is Immediate, WhenIdle (the default: nobody loses work) or
	// OnRestart.
	// +kubebuilder:default=WhenIdle
	// +optional
	Policy RolloutPolicy `json:"policy,omitempty"`

	// MaxUnavailable bounds how many of this template's running
	// environments an Immediate rollout restarts at once: a count such as 5
	// or a percentage such as "25%".
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self > 0 : self.matches('^(100|[1-9][0-9]?)%$')",message="must be a positive integer or a percentage between 1% and 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// AutoProvisionSpec says who may create their own Userland from a template
// when they first sign in. A user matching any list qualifies.
type AutoProvisionSpec struct {
	// Users are identities as the gateway sees them (e-mail, login or OIDC
	// subject), without control characters.
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:XValidation:rule="!self.matches('[\\\\x00-\\\\x1f\\\\x7f]')",message="must not contain control characters"
	// +listType=set
	// +optional
	Users []string `json:"users,omitempty"`

	// Groups are identity-provider groups whose members qualify, without
	// control characters.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:XValidation:rule="!self.matches('[\\\\x00-\\\\x1f\\\\x7f]')",message="must not contain control characters"
	// +listType=set
	// +optional
	Groups []string `json:"groups,omitempty"`

	// EmailDomains qualify every user whose verified e-mail address ends in
	// @<domain>, e.g. "uni.example.ac.jp".
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +listType=set
	// +optional
	EmailDomains []string `json:"emailDomains,omitempty"`
}

// TemplateStatus reports how the template's Userlands are doing. The counts
// are recounted at most every five seconds, so a class starting at once
// costs a few status writes rather than one per Userland.
type TemplateStatus struct {
	// ObservedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions describe the template's state.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Userlands counts the Userlands referring to this template.
	// +optional
	Userlands int32 `json:"userlands"`

	// ReadyUserlands counts those that are Ready.
	// +optional
	ReadyUserlands int32 `json:"readyUserlands"`

	// UpdatesPending counts those still waiting for the current template.
	// +optional
	UpdatesPending int32 `json:"updatesPending"`
}

// Template describes what runs in each user's environment, for Userlands in
// its own namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tmpl,categories=userland-all
// +kubebuilder:printcolumn:name="Routing",type=string,JSONPath=`.spec.http.routing`
// +kubebuilder:printcolumn:name="Idle Timeout",type=string,JSONPath=`.spec.idle.timeout`
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.spec.rollout.policy`
// +kubebuilder:printcolumn:name="Users",type=integer,JSONPath=`.status.userlands`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyUserlands`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.updatesPending`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Template struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec describes the environment.
	Spec TemplateSpec `json:"spec"`
	// Status reports on the template's Userlands.
	// +optional
	Status TemplateStatus `json:"status,omitzero"`
}

// TemplateList is a list of Templates.
// +kubebuilder:object:root=true
type TemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Templates.
	Items []Template `json:"items"`
}

// ClusterTemplateSpec is a TemplateSpec plus the namespaces allowed to use
// it.
type ClusterTemplateSpec struct {
	TemplateSpec `json:",inline"`

	// AllowedNamespaces selects, by label, the namespaces whose Userlands
	// may use this template. When absent, every namespace may. Enforced by
	// the Userland admission webhook.
	// +optional
	AllowedNamespaces *metav1.LabelSelector `json:"allowedNamespaces,omitempty"`
}

// ClusterTemplate is a Template that Userlands in any namespace (or those
// allowed by allowedNamespaces) can use.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ctmpl,categories=userland-all
// +kubebuilder:printcolumn:name="Routing",type=string,JSONPath=`.spec.http.routing`
// +kubebuilder:printcolumn:name="Idle Timeout",type=string,JSONPath=`.spec.idle.timeout`
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.spec.rollout.policy`
// +kubebuilder:printcolumn:name="Users",type=integer,JSONPath=`.status.userlands`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyUserlands`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.updatesPending`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec describes the environment and who may use it.
	Spec ClusterTemplateSpec `json:"spec"`
	// Status reports on the template's Userlands.
	// +optional
	Status TemplateStatus `json:"status,omitzero"`
}

// ClusterTemplateList is a list of ClusterTemplates.
// +kubebuilder:object:root=true
type ClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ClusterTemplates.
	Items []ClusterTemplate `json:"items"`
}
