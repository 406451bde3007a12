package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// An image puller is a DaemonSet per course template, in the course's
// namespace (where the template's imagePullSecrets are), on every node
// the template's pods may run on. Its init containers pull the images:
// the kubelet pulls an init container's image before running it, and a
// container that exits 0 lets the next one start. Not every image has
// a shell (distroless, scratch), so none is assumed: the first init
// container, from the userland image, copies the userland binary (static,
// Go) into an emptyDir; each image's init container then runs that
// binary's `version`, which any Linux image of the node's architecture
// can. A pod is Ready once every init container has run, so the
// DaemonSet's numberReady counts the nodes with every image pulled.

// pullerResources keep a puller pod small: the copy and `version` need a
// few MiB; the scheduler reserves the largest init container's, which is
// this too.
var pullerResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
}

// desiredPullers are c's image pullers, one per template with images.
func desiredPullers(c *v1alpha1.Course, tmpls []courseTemplate, o RoomOptions) []*appsv1.DaemonSet {
	var out []*appsv1.DaemonSet
	for _, t := range tmpls {
		if ds := pullerDaemonSet(c, t, o); ds != nil {
			out = append(out, ds)
		}
	}
	return out
}

// templateImages are the distinct images of a pod spec, sorted.
func templateImages(spec *corev1.PodSpec) []string {
	var images []string
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			if c.Image != "" {
				images = append(images, c.Image)
			}
		}
	}
	slices.Sort(images)
	return slices.Compact(images)
}

// pullerDaemonSet pulls t's images on the nodes t's pods may run on; nil
// when t names no image.
func pullerDaemonSet(c *v1alpha1.Course, t courseTemplate, o RoomOptions) *appsv1.DaemonSet {
	spec := &t.spec.PodTemplate.Spec
	images := templateImages(spec)
	if len(images) == 0 {
		return nil
	}
	sum := sha256.Sum256([]byte(t.key))
	id := hex.EncodeToString(sum[:])[:10]
	labels := map[string]string{
		v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		LabelImagePullerFor:     string(c.UID),
		LabelImagePuller:        id,
	}
	binary := path.Join(pullerBinDir, "userland")
	mount := []corev1.VolumeMount{{Name: "pull", MountPath: pullerBinDir}}
	inits := []corev1.Container{{
		Name:  "install",
		Image: o.PullerImage,
		// The image's entrypoint is the userland binary.
		Args:            []string{"copy-self", binary},
		ImagePullPolicy: corev1.PullIfNotPresent,
		Resources:       pullerResources,
		SecurityContext: restrictedContainer(),
		VolumeMounts:    mount,
	}}
	for i, image := range images {
		inits = append(inits, corev1.Container{
			Name:  fmt.Sprintf("pull-%d", i),
			Image: image,
			// Prints the version and exits 0, in any image.
			Command:         []string{binary, "version"},
			ImagePullPolicy: corev1.PullIfNotPresent,
			Resources:       pullerResources,
			SecurityContext: restrictedContainer(),
			VolumeMounts:    mount,
		})
	}
	pod := corev1.PodSpec{
		InitContainers: inits,
		Containers: []corev1.Container{{
			Name:            "pause",
			Image:           o.PauseImage,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Resources:       pullerResources,
			SecurityContext: restrictedContainer(),
		}},
		ImagePullSecrets: spec.ImagePullSecrets,
		// The template's ServiceAccount, for the image pull secrets it
		// lists (the API server adds them); its token is not mounted.
		ServiceAccountName: spec.ServiceAccountName,
		Volumes: []corev1.Volume{{Name: "pull", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("256Mi"))},
		}}},
		TerminationGracePeriodSeconds: ptr.To[int64](0),
	}
	placeLike(&pod, spec)
	return &appsv1.DaemonSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            childName(c.Name, "images-"+id),
			Namespace:       c.Namespace,
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{courseOwner(c)},
		},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
			// A new node gets its puller at once; a changed template
			// replaces pullers a tenth of the nodes at a time.
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromString("10%"))},
			},
		},
	}
}

// pulledImages rolls the pullers' status up: nodes with every image of
// the templates they can run, of the nodes that can run one. A node that
// runs several templates counts once per template.
func pulledImages(pullers []appsv1.DaemonSet) *v1alpha1.CourseImagesStatus {
	st := &v1alpha1.CourseImagesStatus{}
	for i := range pullers {
		st.Ready += pullers[i].Status.NumberReady
		st.Desired += pullers[i].Status.DesiredNumberScheduled
	}
	return st
}
