package course

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// SharedVolumePrefix starts the pod volume name of a shared volume, so it
// cannot collide with a template's own volumes ("userland-<name>") or the
// template author's.
const SharedVolumePrefix = "course-"

// ApplyToPod adds what c gives a member in role to the pod: the shared
// volumes in every container (read-only for students, read-write for
// staff) and, for students, the per-student caps as the pod's resource
// limits.
func ApplyToPod(spec *corev1.PodSpec, c *v1alpha1.Course, role Role) {
	readOnly := role != Staff
	for _, v := range c.Spec.SharedVolumes {
		name := SharedVolumePrefix + v.Name
		spec.Volumes = append(spec.Volumes, corev1.Volume{
			Name: name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: v.ClaimName, ReadOnly: readOnly,
			}},
		})
		for i := range spec.Containers {
			spec.Containers[i].VolumeMounts = append(spec.Containers[i].VolumeMounts,
				corev1.VolumeMount{Name: name, MountPath: v.MountPath, ReadOnly: readOnly})
		}
	}
	if role != Staff && len(c.Spec.Limits.PerStudent) > 0 {
		capPod(spec, c.Spec.Limits.PerStudent)
	}
}

// capPod makes caps the pod-level limits. No container may exceed them,
// so larger container limits and requests are lowered to the cap; the
// pod-level request is what the containers ask for together, within the
// cap, so a cap does not reserve more than the template asked for.
func capPod(spec *corev1.PodSpec, caps corev1.ResourceList) {
	requested := corev1.ResourceList{}
	for i := range spec.Containers {
		res := &spec.Containers[i].Resources
		for name, limit := range caps {
			lower(res.Limits, name, limit)
			lower(res.Requests, name, limit)
			if q, ok := res.Requests[name]; ok {
				sum := requested[name]
				sum.Add(q)
				requested[name] = sum
			}
		}
	}
	pod := &corev1.ResourceRequirements{Limits: corev1.ResourceList{}}
	for name, limit := range caps {
		pod.Limits[name] = limit.DeepCopy()
		if sum, ok := requested[name]; ok {
			if sum.Cmp(limit) > 0 {
				sum = limit.DeepCopy()
			}
			if pod.Requests == nil {
				pod.Requests = corev1.ResourceList{}
			}
			pod.Requests[name] = sum
		}
	}
	spec.Resources = pod
}

func lower(list corev1.ResourceList, name corev1.ResourceName, limit resource.Quantity) {
	if q, ok := list[name]; ok && q.Cmp(limit) > 0 {
		list[name] = limit.DeepCopy()
	}
}
