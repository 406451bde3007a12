package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/timetable"
)

// Placeholder pods and image pullers: the room a course's sessions need,
// held on the cluster from each session's warm-up to its end
// (docs/operators-term.md). What to hold is decided here, by pure
// functions; course_room_apply.go writes it.

const (
	// LabelPlaceholderFor, on a placeholder pod, is the UID of the Course
	// it holds room for (a UID fits a label value; a course name may not).
	LabelPlaceholderFor = "userland.dev/placeholder-for"
	// LabelImagePullerFor, on an image puller DaemonSet and its pods, is
	// the UID of its Course.
	LabelImagePullerFor = "userland.dev/image-puller-for"
	// LabelImagePuller tells one course's pullers apart (the template's
	// key, hashed): a DaemonSet's selector.
	LabelImagePuller = "userland.dev/image-puller"

	// DefaultPlaceholderPriorityClass is the PriorityClass the chart
	// ships for placeholders (value -10, preemptionPolicy Never).
	DefaultPlaceholderPriorityClass = "userland-placeholder"
	// DefaultPauseImage runs in placeholders and as the pullers' main
	// container: it sleeps until stopped, as non-root (65535).
	DefaultPauseImage = "registry.k8s.io/pause:3.10.1"
	// DefaultPullerImage holds the userland binary, which the pullers copy
	// into each pod to run as the command of the images they pull.
	DefaultPullerImage = "ghcr.io/userland-dev/userland:latest"

	// pullerBinDir is where a puller pod's first init container puts the
	// userland binary, in an emptyDir the others mount.
	pullerBinDir = "/userland-pull"
	// nobody is the user every placeholder and puller container runs as,
	// whatever the image says: Pod Security's restricted level asks for
	// non-root, and the kubelet cannot check a named USER.
	nobody = 65534
)

// RoomOptions are the cluster-wide settings of placeholders and pullers
// (controller flags, chart values).
type RoomOptions struct {
	// PriorityClass is the placeholders' PriorityClass.
	PriorityClass string
	// PauseImage is the placeholders' and the pullers' sleeping image.
	PauseImage string
	// PullerImage is the userland image, whose binary the pullers run.
	PullerImage string
}

// holdsRoom says whether a course holds placeholders and image pullers
// at now: from its next session's warm-up to that session's end (Next is
// the session in progress, or the next one), in term.
func holdsRoom(tt timetable.Result, now time.Time, phase v1alpha1.CoursePhase) bool {
	return phase == v1alpha1.CourseInTerm && tt.Warm(now) && now.Before(tt.Next.End)
}

// withDefaults fills what o leaves empty.
func (o RoomOptions) withDefaults() RoomOptions {
	if o.PriorityClass == "" {
		o.PriorityClass = DefaultPlaceholderPriorityClass
	}
	if o.PauseImage == "" {
		o.PauseImage = DefaultPauseImage
	}
	if o.PullerImage == "" {
		o.PullerImage = DefaultPullerImage
	}
	return o
}

// courseTemplate is one resolved template of a course, as the room sees it.
type courseTemplate struct {
	// key is templates.Key: it names the template's puller.
	key  string
	spec *v1alpha1.TemplateSpec
}

// desiredPlaceholders are the n placeholder pods of c, spread over its
// templates in turn (placeholder i is sized and placed like template i
// mod len(tmpls)), so a course of one template gets n of its size and a
// mixed course holds room of each kind. None without a template.
func desiredPlaceholders(c *v1alpha1.Course, tmpls []courseTemplate, n int32, o RoomOptions) []*corev1.Pod {
	if len(tmpls) == 0 || n <= 0 {
		return nil
	}
	pods := make([]*corev1.Pod, 0, n)
	for i := range int(n) {
		pods = append(pods, placeholderPod(c, tmpls[i%len(tmpls)].spec, i, o))
	}
	return pods
}

// placeholderPod is one placeholder: the pause image asking for what the
// template's pod asks, where the template's pod may run, at the
// placeholder priority, with nothing a restricted namespace refuses.
func placeholderPod(c *v1alpha1.Course, tmpl *v1alpha1.TemplateSpec, i int, o RoomOptions) *corev1.Pod {
	spec := &tmpl.PodTemplate.Spec
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      childName(c.Name, fmt.Sprintf("placeholder-%d", i)),
			Namespace: c.Namespace,
			Labels: map[string]string{
				v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
				LabelPlaceholderFor:     string(c.UID),
			},
			OwnerReferences: []metav1.OwnerReference{courseOwner(c)},
		},
		Spec: corev1.PodSpec{
			PriorityClassName: o.PriorityClass,
			// Preempted at once: a student's pod is waiting for the room.
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name:            "placeholder",
				Image:           o.PauseImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Resources:       corev1.ResourceRequirements{Requests: podRequests(spec)},
				SecurityContext: restrictedContainer(),
			}},
		},
	}
	placeLike(&pod.Spec, spec)
	return pod
}

// placeLike gives pod what decides where template's pod may run (node
// selector, tolerations, node affinity: not pod affinity, which names
// other pods' labels) and what every pod of the room shares: no API
// token, no service links, the restricted security context.
func placeLike(pod, template *corev1.PodSpec) {
	pod.NodeSelector = template.NodeSelector
	pod.Tolerations = template.Tolerations
	if a := template.Affinity; a != nil && a.NodeAffinity != nil {
		pod.Affinity = &corev1.Affinity{NodeAffinity: a.NodeAffinity}
	}
	pod.AutomountServiceAccountToken = ptr.To(false)
	pod.EnableServiceLinks = ptr.To(false)
	pod.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](nobody),
		RunAsGroup:     ptr.To[int64](nobody),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// restrictedContainer is what Pod Security's restricted level asks of a
// container, and a read-only root: nothing here writes but the puller's
// copy, to its emptyDir.
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// podRequests is what the scheduler reserves for a pod of spec: per
// resource, the containers' requests added up (a limit stands for a
// missing request, as the API server defaults it), or an init
// container's alone when larger (init containers run one at a time).
// Sidecars (restartable init containers) are counted as containers.
func podRequests(spec *corev1.PodSpec) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for _, c := range spec.Containers {
		addRequests(sum, c.Resources)
	}
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addRequests(sum, c.Resources)
		}
	}
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			continue
		}
		for name, q := range requestsOf(c.Resources) {
			if cur, ok := sum[name]; !ok || q.Cmp(cur) > 0 {
				sum[name] = q.DeepCopy()
			}
		}
	}
	if len(sum) == 0 {
		return nil
	}
	return sum
}

func addRequests(sum corev1.ResourceList, r corev1.ResourceRequirements) {
	for name, q := range requestsOf(r) {
		cur := sum[name]
		cur.Add(q)
		sum[name] = cur
	}
}

// requestsOf is a container's requests, a limit standing for a missing
// request.
func requestsOf(r corev1.ResourceRequirements) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range r.Limits {
		out[name] = q
	}
	for name, q := range r.Requests {
		out[name] = q
	}
	return out
}

// roomPlan is what to write to reach the desired pods or DaemonSets:
// objects to apply (new, or with another applied hash) and names to
// delete (no longer desired).
type roomPlan[T any] struct {
	apply  []T
	delete []string
}

// existingChild is a cached child of the room: its name, applied hash,
// and whether it is on its way out.
type existingChild struct {
	name, hash string
	// gone: being deleted (a preempted placeholder) or finished (a
	// placeholder whose node went away): put back once deleted.
	gone, terminating bool
}

// planRoom compares desired (named, with applied hashes) to existing.
// A child whose hash differs is applied again; for pods, whose spec the
// API server will not change, replace says to delete it instead, and
// the next reconcile (its deletion's event) creates it anew. A child
// being deleted is left to go, and only then put back.
func planRoom[T any](desired []T, nameHash func(T) (string, string), existing []existingChild, replace bool) roomPlan[T] {
	var plan roomPlan[T]
	have := make(map[string]existingChild, len(existing))
	for _, e := range existing {
		have[e.name] = e
	}
	want := make(map[string]bool, len(desired))
	for _, d := range desired {
		name, hash := nameHash(d)
		want[name] = true
		e, ok := have[name]
		switch {
		case !ok:
			plan.apply = append(plan.apply, d)
		case e.terminating:
		case e.gone || e.hash != hash && replace:
			plan.delete = append(plan.delete, name)
		case e.hash != hash:
			plan.apply = append(plan.apply, d)
		}
	}
	for _, e := range existing {
		if !want[e.name] && !e.terminating {
			plan.delete = append(plan.delete, e.name)
		}
	}
	return plan
}

// withAppliedHash stamps obj's hash (of everything desired) into its
// annotations and returns it: a cached child carrying it is current.
func withAppliedHash(obj metav1.Object, desired any) string {
	h := hashOf(desired)
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationAppliedHash] = h
	obj.SetAnnotations(a)
	return h
}

// courseOwner makes c the controlling owner: its children go with it.
func courseOwner(c *v1alpha1.Course) metav1.OwnerReference {
	return *metav1.NewControllerRef(c, v1alpha1.GroupVersion.WithKind("Course"))
}

// childName is base-suffix, shortened with a hash of base when longer
// than 63 characters, which keeps DaemonSet pod names (a further suffix)
// within bounds and reads well in kubectl.
func childName(base, suffix string) string {
	name := base + "-" + suffix
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(base))
	keep := 63 - len(suffix) - 1 - 9
	return strings.TrimRight(base[:keep], ".-") + "-" + hex.EncodeToString(sum[:])[:8] + "-" + suffix
}
