package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/naming"
)

// Annotations and labels the controller keeps on children.
const (
	// AnnotationTemplateHash records the hash of the pod template a
	// Deployment runs, so rollouts are detected without diffing specs.
	AnnotationTemplateHash = "userland.dev/template-hash"
	// AnnotationAppliedHash records the hash of what the controller last
	// applied to a child, so unchanged children are not written again.
	AnnotationAppliedHash = "userland.dev/applied-hash"
	// AnnotationStartedAt is when the environment was last scaled up; idle
	// time counts from the later of this and the last activity.
	AnnotationStartedAt = "userland.dev/started-at"
	// AnnotationIdleStoppedAt is when the environment was stopped for
	// idleness; activity after it wakes the environment.
	AnnotationIdleStoppedAt = "userland.dev/idle-stopped-at"
	// LabelUser carries a hash of the owner's identity on retained volumes,
	// so a volume is re-adopted only by a Userland of the same user.
	LabelUser = "userland.dev/user-hash"
	// LabelVolume names the template volume a claim was made for.
	LabelVolume = "userland.dev/volume"
	// LabelRetained marks claims kept after their Userland was deleted.
	LabelRetained = "userland.dev/retained"
	// LabelNetworkPolicy on an environment pod names the NetworkPolicy
	// that isolates it (naming.TemplateNetworkPolicy), which selects pods by
	// it; the policy carries it too, so its events map to the template.
	LabelNetworkPolicy = "userland.dev/network-policy"
	// AnnotationTemplateKind and AnnotationTemplateName on a shared
	// NetworkPolicy say which template it is for.
	AnnotationTemplateKind = "userland.dev/template-kind"
	AnnotationTemplateName = "userland.dev/template-name"
)

// Environment variables every container receives.
const (
	EnvUser      = "USERLAND_USER"
	EnvName      = "USERLAND_NAME"
	EnvNamespace = "USERLAND_NAMESPACE"
	EnvBasePath  = "USERLAND_BASE_PATH"
	EnvURL       = "USERLAND_URL"
)

// Routes says where the gateway serves environments (see package naming).
type Routes = naming.Routes

// childLabels are the labels every child carries.
func childLabels(ul *v1alpha1.Userland) map[string]string {
	return map[string]string{
		v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		v1alpha1.LabelUserland:  ul.Name,
	}
}

// UserHash is a label-safe digest of an identity; identities such as e-mail
// addresses are not valid label values, and need not be readable there.
func UserHash(user string) string {
	sum := sha256.Sum256([]byte(user))
	return hex.EncodeToString(sum[:])[:32]
}

// ownedMeta is the metadata of a child named after and owned by ul.
func ownedMeta(ul *v1alpha1.Userland) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: ul.Name, Namespace: ul.Namespace,
		Labels:          childLabels(ul),
		OwnerReferences: []metav1.OwnerReference{ownerRef(ul)},
	}
}

func ownerRef(ul *v1alpha1.Userland) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         v1alpha1.GroupVersion.String(),
		Kind:               "Userland",
		Name:               ul.Name,
		UID:                ul.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// hashOf returns a short stable digest of v's JSON form.
func hashOf(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		// Only API types are hashed; they always marshal.
		panic(fmt.Sprintf("hashing %T: %v", v, err))
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16]
}

// ClaimName is the PersistentVolumeClaim of one template volume.
func ClaimName(ul *v1alpha1.Userland, volume string) string {
	return ul.Name + "-" + volume
}

// PodTemplate builds the pod an environment runs from the template: the
// template's pod with the per-user volumes mounted, identity variables set,
// the service-account token off unless asked for, and Userland's labels.
func PodTemplate(ul *v1alpha1.Userland, spec *v1alpha1.TemplateSpec, routes Routes) corev1.PodTemplateSpec {
	return PodTemplateFor(ul, spec, routes, nil, course.None, true)
}

// PodTemplateFor is PodTemplate with what a course gives a member in role
// (shared volumes, per-student caps); c may be nil. bound says whether the
// pod carries the Userland's UID (see BindsIncarnation).
func PodTemplateFor(ul *v1alpha1.Userland, spec *v1alpha1.TemplateSpec, routes Routes, c *v1alpha1.Course, role course.Role, bound bool) corev1.PodTemplateSpec {
	pod := *spec.PodTemplate.DeepCopy()
	pod.Labels = mergeLabels(pod.Labels, childLabels(ul))
	// Never the template's own: a template naming another Userland's UID
	// would put its pods behind that Userland's Service.
	delete(pod.Labels, v1alpha1.LabelUserlandUID)
	if bound {
		pod.Labels[v1alpha1.LabelUserlandUID] = string(ul.UID)
	}
	// Set last, over the template's own labels: the shared policy selects
	// pods by it, and a pod without it would be open to everyone.
	pod.Labels[LabelNetworkPolicy] = naming.TemplateNetworkPolicy(ul.Spec.TemplateRef.Kind, ul.Spec.TemplateRef.Name)
	if pod.Spec.AutomountServiceAccountToken == nil {
		pod.Spec.AutomountServiceAccountToken = ptr.To(false)
	}
	routing := naming.Routing(spec.HTTP.Routing, routes.Domain != "")
	env := []corev1.EnvVar{
		{Name: EnvUser, Value: ul.Spec.User},
		{Name: EnvName, Value: ul.Name},
		{Name: EnvNamespace, Value: ul.Namespace},
		{Name: EnvBasePath, Value: naming.BasePath(ul.Namespace, ul.Name, routing)},
		{Name: EnvURL, Value: routes.URL(ul.Namespace, ul.Name, routing)},
	}
	for _, v := range spec.Volumes {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
			Name: "userland-" + v.Name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: ClaimName(ul, v.Name),
			}},
		})
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		// Identity variables come first so the template's own variables
		// can refer to them with $(USERLAND_...).
		c.Env = append(slices.Clone(env), c.Env...)
		for _, v := range spec.Volumes {
			if len(v.Containers) == 0 || slices.Contains(v.Containers, c.Name) {
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "userland-" + v.Name, MountPath: v.MountPath})
			}
		}
	}
	if c != nil {
		course.ApplyToPod(&pod.Spec, c, role)
	}
	pod.Annotations = maps.Clone(pod.Annotations)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationTemplateHash] = hashOf(pod)
	// After the hash: a restart request is not a template change.
	if at := ul.Annotations[v1alpha1.AnnotationRestartedAt]; at != "" {
		pod.Annotations[v1alpha1.AnnotationRestartedAt] = at
	}
	return pod
}

func mergeLabels(base, overrides map[string]string) map[string]string {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, overrides)
	return out
}

// BindsIncarnation says whether an environment's pods carry its Userland's
// UID (LabelUserlandUID) and its Service selects by it, given its
// Deployment as the cache shows it (nil: none yet). Every Deployment this
// controller makes does. One made before the label existed is left
// without it, and its Service selects by name alone as before: adding a
// label to its pod template would restart every running environment on
// upgrade. A Userland created after the upgrade, including one created
// again under an earlier one's name, is always bound, so it never selects
// the earlier one's pods.
//
// A Deployment whose pods carry another value (edited by hand) is not
// bound: its Service then still selects its pods, by name, until the
// controller next replaces its pod (see bindOnReplace).
func BindsIncarnation(ul *v1alpha1.Userland, dep *appsv1.Deployment) bool {
	return dep == nil || dep.Spec.Template.Labels[v1alpha1.LabelUserlandUID] == string(ul.UID)
}

// Deployment builds the environment's Deployment: one replica when running,
// none when stopped, recreated rather than rolled (a ReadWriteOnce volume
// cannot be attached to old and new pods at once).
func Deployment(ul *v1alpha1.Userland, pod corev1.PodTemplateSpec, replicas int32, annotations map[string]string) *appsv1.Deployment {
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: ownedMeta(ul),
		Spec: appsv1.DeploymentSpec{
			Replicas:             ptr.To(replicas),
			Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelUserland: ul.Name}},
			Strategy:             appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			RevisionHistoryLimit: ptr.To[int32](2),
			Template:             pod,
		},
	}
	d.Annotations = annotations
	return d
}

// Service builds the environment's headless Service: its DNS name resolves
// straight to the ready pod, which is all the gateway needs. Without a
// cluster IP there is no IP allocation (the slowest write when a class
// starts at once), no kube-proxy rules on every node for each of
// thousands of environments, and no address range to run out of. bound
// says whether it selects by the Userland's UID too (BindsIncarnation).
func Service(ul *v1alpha1.Userland, port int32, bound bool) *corev1.Service {
	selector := map[string]string{v1alpha1.LabelUserland: ul.Name}
	if bound {
		selector[v1alpha1.LabelUserlandUID] = string(ul.UID)
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: ownedMeta(ul),
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: corev1.ClusterIPNone,
			Selector:  selector,
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP,
				Port: port, TargetPort: intstr.FromInt32(port),
			}},
		},
	}
}

// Claim builds a new PersistentVolumeClaim for one template volume. Claims
// with reclaimPolicy Delete are owned by the Userland (garbage-collected with
// it); retained ones are not, and carry the user's hash for re-adoption.
func Claim(ul *v1alpha1.Userland, v v1alpha1.VolumeSpec) *corev1.PersistentVolumeClaim {
	labels := childLabels(ul)
	labels[LabelVolume] = v.Name
	labels[LabelUser] = UserHash(ul.Spec.User)
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name: ClaimName(ul, v.Name), Namespace: ul.Namespace,
			Labels: labels,
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      v.AccessModes,
			StorageClassName: v.StorageClassName,
		},
	}
	if v.Size != nil {
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: *v.Size}
	}
	if v.ReclaimPolicy == v1alpha1.ReclaimDelete {
		pvc.OwnerReferences = []metav1.OwnerReference{ownerRef(ul)}
	}
	return pvc
}
