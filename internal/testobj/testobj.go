// Package testobj builds the objects tests create, in the manner of Kueue's
// wrappers: MakeTemplate(ns, name).Idle(5*time.Minute).Obj(). Each Make
// starts from the smallest valid object, so a test names only what it is
// about. Tests and benchmarks only: shipped code never imports it (`make
// verify` checks).
package testobj

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// DefaultImage is the image of a template made here.
const DefaultImage = "example.org/app:1"

// TemplateWrapper builds a Template.
type TemplateWrapper struct{ t v1alpha1.Template }

// MakeTemplate is a valid Template: one container "app" running
// DefaultImage and serving HTTP on 8080, and nothing else.
func MakeTemplate(namespace, name string) *TemplateWrapper {
	return &TemplateWrapper{t: v1alpha1.Template{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.TemplateSpec{
			PodTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: DefaultImage, Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			}}}},
			HTTP: v1alpha1.HTTPSpec{Port: 8080},
		},
	}}
}

// Obj returns the Template.
func (w *TemplateWrapper) Obj() *v1alpha1.Template { return w.t.DeepCopy() }

// Cluster returns a ClusterTemplate of the same name and spec.
func (w *TemplateWrapper) Cluster() *v1alpha1.ClusterTemplate {
	return &v1alpha1.ClusterTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: w.t.Name},
		Spec:       v1alpha1.ClusterTemplateSpec{TemplateSpec: *w.t.Spec.DeepCopy()},
	}
}

// Image sets the container's image.
func (w *TemplateWrapper) Image(image string) *TemplateWrapper {
	w.t.Spec.PodTemplate.Spec.Containers[0].Image = image
	return w
}

// DisplayName sets what people call the template.
func (w *TemplateWrapper) DisplayName(name string) *TemplateWrapper {
	w.t.Spec.DisplayName = name
	return w
}

// NodeSelector sets the pod's node selector, e.g. a label no node has,
// so no node can take the pod.
func (w *TemplateWrapper) NodeSelector(labels map[string]string) *TemplateWrapper {
	w.t.Spec.PodTemplate.Spec.NodeSelector = labels
	return w
}

// Container renames the container.
func (w *TemplateWrapper) Container(name string) *TemplateWrapper {
	w.t.Spec.PodTemplate.Spec.Containers[0].Name = name
	return w
}

// Port sets the port the container serves and the gateway proxies to.
func (w *TemplateWrapper) Port(port int32) *TemplateWrapper {
	w.t.Spec.PodTemplate.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port}}
	w.t.Spec.HTTP.Port = port
	return w
}

// StripPrefix sets http.stripPrefix.
func (w *TemplateWrapper) StripPrefix(strip bool) *TemplateWrapper {
	w.t.Spec.HTTP.StripPrefix = &strip
	return w
}

// Routing sets http.routing.
func (w *TemplateWrapper) Routing(r v1alpha1.Routing) *TemplateWrapper {
	w.t.Spec.HTTP.Routing = r
	return w
}

// Idle stops environments after d without activity.
func (w *TemplateWrapper) Idle(d time.Duration) *TemplateWrapper {
	w.t.Spec.Idle = &v1alpha1.IdleSpec{Timeout: metav1.Duration{Duration: d}}
	return w
}

// Volume adds a volume mounted at mountPath.
func (w *TemplateWrapper) Volume(name, mountPath string) *TemplateWrapper {
	w.t.Spec.Volumes = append(w.t.Spec.Volumes, v1alpha1.VolumeSpec{Name: name, MountPath: mountPath})
	return w
}

// Rollout sets the rollout policy, and maxUnavailable when not empty.
func (w *TemplateWrapper) Rollout(policy v1alpha1.RolloutPolicy, maxUnavailable string) *TemplateWrapper {
	w.t.Spec.Rollout.Policy = policy
	if maxUnavailable != "" {
		mu := intstr.Parse(maxUnavailable)
		w.t.Spec.Rollout.MaxUnavailable = &mu
	}
	return w
}

// AutoProvision lets users of these e-mail domains self-provision.
func (w *TemplateWrapper) AutoProvision(emailDomains ...string) *TemplateWrapper {
	w.t.Spec.AutoProvision = &v1alpha1.AutoProvisionSpec{EmailDomains: emailDomains}
	return w
}

// UserlandWrapper builds a Userland.
type UserlandWrapper struct{ u v1alpha1.Userland }

// MakeUserland is a Userland of user from the Template named template.
func MakeUserland(namespace, name, user, template string) *UserlandWrapper {
	return &UserlandWrapper{u: v1alpha1.Userland{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       v1alpha1.UserlandSpec{User: user, TemplateRef: v1alpha1.TemplateReference{Name: template}},
	}}
}

// Obj returns the Userland.
func (w *UserlandWrapper) Obj() *v1alpha1.Userland { return w.u.DeepCopy() }

// ClusterTemplate refers to a ClusterTemplate instead.
func (w *UserlandWrapper) ClusterTemplate() *UserlandWrapper {
	w.u.Spec.TemplateRef.Kind = v1alpha1.TemplateKindClusterTemplate
	return w
}

// Suspend sets spec.suspend.
func (w *UserlandWrapper) Suspend() *UserlandWrapper {
	w.u.Spec.Suspend = true
	return w
}

// CourseWrapper builds a Course.
type CourseWrapper struct{ c v1alpha1.Course }

// MakeCourse is a Course whose term runs from a day ago to 90 days ahead,
// with no students, staff or templates yet.
func MakeCourse(namespace, name string) *CourseWrapper {
	now := time.Now().Truncate(time.Second)
	return &CourseWrapper{c: v1alpha1.Course{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.CourseSpec{Term: v1alpha1.CourseTerm{
			Start: metav1.NewTime(now.Add(-24 * time.Hour)), End: metav1.NewTime(now.Add(90 * 24 * time.Hour)),
		}},
	}}
}

// Obj returns the Course.
func (w *CourseWrapper) Obj() *v1alpha1.Course { return w.c.DeepCopy() }

// Term sets the term.
func (w *CourseWrapper) Term(start, end time.Time) *CourseWrapper {
	w.c.Spec.Term = v1alpha1.CourseTerm{Start: metav1.NewTime(start), End: metav1.NewTime(end)}
	return w
}

// Students adds listed students.
func (w *CourseWrapper) Students(users ...string) *CourseWrapper {
	w.c.Spec.Students.Users = append(w.c.Spec.Students.Users, users...)
	return w
}

// StudentGroups adds groups of students.
func (w *CourseWrapper) StudentGroups(groups ...string) *CourseWrapper {
	w.c.Spec.Students.Groups = append(w.c.Spec.Students.Groups, groups...)
	return w
}

// Staff adds listed staff.
func (w *CourseWrapper) Staff(users ...string) *CourseWrapper {
	w.c.Spec.Staff.Users = append(w.c.Spec.Staff.Users, users...)
	return w
}

// StaffGroups adds groups of staff.
func (w *CourseWrapper) StaffGroups(groups ...string) *CourseWrapper {
	w.c.Spec.Staff.Groups = append(w.c.Spec.Staff.Groups, groups...)
	return w
}

// Template adds a Template of the course's namespace, provisioned per mode.
func (w *CourseWrapper) Template(name string, mode v1alpha1.ProvisionMode) *CourseWrapper {
	w.c.Spec.Templates = append(w.c.Spec.Templates, v1alpha1.CourseTemplate{Kind: v1alpha1.TemplateKindTemplate, Name: name, Provision: mode})
	return w
}

// SharedVolume mounts claim at mountPath.
func (w *CourseWrapper) SharedVolume(name, claim, mountPath string) *CourseWrapper {
	w.c.Spec.SharedVolumes = append(w.c.Spec.SharedVolumes, v1alpha1.SharedVolume{Name: name, ClaimName: claim, MountPath: mountPath})
	return w
}

// MaxRunning sets limits.maxRunning.
func (w *CourseWrapper) MaxRunning(n int32) *CourseWrapper {
	w.c.Spec.Limits.MaxRunning = &n
	return w
}

// PerStudent caps each student's pod.
func (w *CourseWrapper) PerStudent(cpu, memory string) *CourseWrapper {
	w.c.Spec.Limits.PerStudent = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	return w
}

// Retention sets lifecycle.retention, and the snapshot class when given.
func (w *CourseWrapper) Retention(d time.Duration, snapshotClass string) *CourseWrapper {
	w.c.Spec.Lifecycle.Retention = &metav1.Duration{Duration: d}
	if snapshotClass != "" {
		w.c.Spec.Lifecycle.VolumeSnapshotClassName = &snapshotClass
	}
	return w
}

// schedule is the Course's schedule, made on first use.
func (w *CourseWrapper) schedule() *v1alpha1.CourseSchedule {
	if w.c.Spec.Schedule == nil {
		w.c.Spec.Schedule = &v1alpha1.CourseSchedule{}
	}
	return w.c.Spec.Schedule
}

// Weekly adds a weekly session on day, start to end (HH:MM) in zone.
func (w *CourseWrapper) Weekly(day v1alpha1.Weekday, start, end, zone string) *CourseWrapper {
	s := w.schedule()
	s.Sessions = append(s.Sessions, v1alpha1.CourseSession{Day: &day, Start: start, End: end, TimeZone: zone})
	return w
}

// Dated adds a session on date (YYYY-MM-DD), start to end in zone.
func (w *CourseWrapper) Dated(date, start, end, zone string) *CourseWrapper {
	s := w.schedule()
	s.Sessions = append(s.Sessions, v1alpha1.CourseSession{Date: &date, Start: start, End: end, TimeZone: zone})
	return w
}

// Exceptions adds dates with no session.
func (w *CourseWrapper) Exceptions(dates ...string) *CourseWrapper {
	s := w.schedule()
	s.Exceptions = append(s.Exceptions, dates...)
	return w
}

// Warmup sets schedule.warmup.
func (w *CourseWrapper) Warmup(d time.Duration) *CourseWrapper {
	w.schedule().Warmup = &metav1.Duration{Duration: d}
	return w
}

// WarmPercent sets schedule.warmPercent.
func (w *CourseWrapper) WarmPercent(n int32) *CourseWrapper {
	w.schedule().WarmPercent = &n
	return w
}

// Placeholders sets schedule.placeholders.
func (w *CourseWrapper) Placeholders(n int32) *CourseWrapper {
	w.schedule().Placeholders = &n
	return w
}

// PullImages sets schedule.pullImages.
func (w *CourseWrapper) PullImages(pull bool) *CourseWrapper {
	w.schedule().PullImages = &pull
	return w
}
