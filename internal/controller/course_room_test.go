package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/timetable"
	"github.com/userland-dev/userland/internal/webhook"
)

func resources(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestPodRequests(t *testing.T) {
	sidecar := ptr.To(corev1.ContainerRestartPolicyAlways)
	cases := map[string]struct {
		spec corev1.PodSpec
		want corev1.ResourceList
	}{
		"containers add up": {spec: corev1.PodSpec{Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Requests: resources("cpu", "500m", "memory", "1Gi")}},
			{Resources: corev1.ResourceRequirements{Requests: resources("cpu", "250m", "memory", "512Mi")}},
		}}, want: resources("cpu", "750m", "memory", "1536Mi")},
		"a limit stands for a missing request": {spec: corev1.PodSpec{Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Limits: resources("cpu", "1", "memory", "2Gi"), Requests: resources("cpu", "100m")}},
		}}, want: resources("cpu", "100m", "memory", "2Gi")},
		"a larger init container counts alone": {spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: resources("memory", "4Gi")}}},
			Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: resources("cpu", "1", "memory", "1Gi")}}},
		}, want: resources("cpu", "1", "memory", "4Gi")},
		"a sidecar adds to the containers": {spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{RestartPolicy: sidecar, Resources: corev1.ResourceRequirements{Requests: resources("cpu", "100m")}}},
			Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: resources("cpu", "1")}}},
		}, want: resources("cpu", "1100m")},
		"nothing asked": {spec: corev1.PodSpec{Containers: []corev1.Container{{}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, podRequests(&tc.spec), cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func roomCourse() *v1alpha1.Course {
	return &v1alpha1.Course{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "uid-1"}}
}

func roomTemplate(image, cpu string, selector map[string]string) courseTemplate {
	spec := &v1alpha1.TemplateSpec{}
	spec.PodTemplate.Spec = corev1.PodSpec{
		NodeSelector: selector,
		Tolerations:  []corev1.Toleration{{Key: "class", Operator: corev1.TolerationOpExists}},
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}, NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}},
			}}},
		}},
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "registry"}},
		ServiceAccountName: "lab-pulls",
		InitContainers:     []corev1.Container{{Name: "init", Image: image}},
		Containers: []corev1.Container{
			{Name: "web", Image: image, Resources: corev1.ResourceRequirements{Requests: resources("cpu", cpu)}},
			{Name: "db", Image: "mariadb:11"},
		},
	}
	return courseTemplate{key: "Template/ns/" + image, spec: spec}
}

// restricted checks spec against the restricted Pod Security level, as
// the webhook does for templates.
func restricted(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	ps, err := webhook.NewPodSecurity("restricted")
	if err != nil {
		t.Fatal(err)
	}
	if errs := ps.Validate(&corev1.PodTemplateSpec{Spec: spec}, field.NewPath("spec")); len(errs) > 0 {
		t.Errorf("not restricted: %v", errs)
	}
}

func TestDesiredPlaceholders(t *testing.T) {
	o := RoomOptions{}.withDefaults()
	small := roomTemplate("lab:1", "500m", map[string]string{"pool": "students"})
	big := roomTemplate("gpu:1", "2", map[string]string{"pool": "gpu"})
	pods := desiredPlaceholders(roomCourse(), []courseTemplate{small, big}, 3, o)
	var got []string
	for _, p := range pods {
		got = append(got, p.Name+" "+p.Spec.NodeSelector["pool"]+" "+p.Spec.Containers[0].Resources.Requests.Cpu().String())
	}
	want := []string{"db-placeholder-0 students 500m", "db-placeholder-1 gpu 2", "db-placeholder-2 students 500m"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placeholders spread over the templates in turn (-want +got):\n%s", diff)
	}
	p := pods[0]
	if p.Spec.PriorityClassName != DefaultPlaceholderPriorityClass || p.Spec.Containers[0].Image != DefaultPauseImage {
		t.Errorf("priority class %q, image %q", p.Spec.PriorityClassName, p.Spec.Containers[0].Image)
	}
	if p.Labels[LabelPlaceholderFor] != "uid-1" || p.OwnerReferences[0].Name != "db" || !*p.OwnerReferences[0].Controller {
		t.Errorf("labels %v, owners %v", p.Labels, p.OwnerReferences)
	}
	if p.Spec.Affinity.PodAntiAffinity != nil || p.Spec.Affinity.NodeAffinity == nil || len(p.Spec.Tolerations) != 1 {
		t.Errorf("placed like the template (node affinity and tolerations, no pod affinity): %+v %v", p.Spec.Affinity, p.Spec.Tolerations)
	}
	if *p.Spec.AutomountServiceAccountToken {
		t.Error("a placeholder mounts an API token")
	}
	restricted(t, p.Spec)
	if got := desiredPlaceholders(roomCourse(), nil, 3, o); got != nil {
		t.Errorf("without a template: %d placeholders, want none", len(got))
	}
}

func TestPullerDaemonSet(t *testing.T) {
	o := RoomOptions{PullerImage: "userland:1", PauseImage: "pause:1"}.withDefaults()
	ds := pullerDaemonSet(roomCourse(), roomTemplate("lab:1", "1", map[string]string{"pool": "students"}), o)
	var inits []string
	for _, c := range ds.Spec.Template.Spec.InitContainers {
		inits = append(inits, c.Name+" "+c.Image+" "+strings.Join(append(c.Command, c.Args...), " "))
	}
	want := []string{
		"install userland:1 copy-self /userland-pull/userland",
		"pull-0 lab:1 /userland-pull/userland version",
		"pull-1 mariadb:11 /userland-pull/userland version",
	}
	if diff := cmp.Diff(want, inits); diff != "" {
		t.Errorf("init containers: the binary copied, then each image once (-want +got):\n%s", diff)
	}
	spec := ds.Spec.Template.Spec
	if spec.NodeSelector["pool"] != "students" || spec.ImagePullSecrets[0].Name != "registry" || spec.ServiceAccountName != "lab-pulls" || spec.Containers[0].Image != "pause:1" {
		t.Errorf("node selector %v, pull secrets %v, service account %q, main image %s", spec.NodeSelector, spec.ImagePullSecrets, spec.ServiceAccountName, spec.Containers[0].Image)
	}
	if *spec.AutomountServiceAccountToken {
		t.Error("a puller mounts an API token")
	}
	if diff := cmp.Diff(ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels); diff != "" {
		t.Errorf("selector and pod labels differ: %s", diff)
	}
	restricted(t, spec)
	empty := courseTemplate{key: "k", spec: &v1alpha1.TemplateSpec{}}
	if got := pullerDaemonSet(roomCourse(), empty, o); got != nil {
		t.Errorf("a template with no image got a puller")
	}
}

func TestPlanRoom(t *testing.T) {
	type obj struct{ name, hash string }
	nameHash := func(o obj) (string, string) { return o.name, o.hash }
	desired := []obj{{"a", "1"}, {"b", "1"}}
	cases := map[string]struct {
		existing []existingChild
		replace  bool
		want     roomPlan[obj]
	}{
		"none yet: all applied": {want: roomPlan[obj]{apply: desired}},
		"steady state: nothing": {existing: []existingChild{{name: "a", hash: "1"}, {name: "b", hash: "1"}}},
		"changed, updatable: applied again": {existing: []existingChild{{name: "a", hash: "0"}, {name: "b", hash: "1"}},
			want: roomPlan[obj]{apply: []obj{{"a", "1"}}}},
		"changed pod: deleted, made again once gone": {existing: []existingChild{{name: "a", hash: "0"}, {name: "b", hash: "1"}}, replace: true,
			want: roomPlan[obj]{delete: []string{"a"}}},
		"preempted, still terminating: left to go": {existing: []existingChild{{name: "a", hash: "1", terminating: true}, {name: "b", hash: "1"}}},
		"failed: deleted": {existing: []existingChild{{name: "a", hash: "1", gone: true}, {name: "b", hash: "1"}},
			want: roomPlan[obj]{delete: []string{"a"}}},
		"no longer desired: deleted": {existing: []existingChild{{name: "a", hash: "1"}, {name: "b", hash: "1"}, {name: "c", hash: "1"}, {name: "d", terminating: true}},
			want: roomPlan[obj]{delete: []string{"c"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := planRoom(desired, nameHash, tc.existing, tc.replace)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(roomPlan[obj]{}, obj{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if got := planRoom(nil, nameHash, []existingChild{{name: "a"}}, true); len(got.delete) != 1 {
		t.Errorf("outside the window: %+v, want a deleted", got)
	}
}

func TestChildName(t *testing.T) {
	long := strings.Repeat("a", 60) + ".b" + strings.Repeat("c", 100)
	for _, base := range []string{"db", long, strings.Repeat("x", 44) + "." + strings.Repeat("y", 30)} {
		name := childName(base, "images-0123456789")
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 || len(name) > 63 {
			t.Errorf("childName(%q) = %q (%d): %v", base, name, len(name), errs)
		}
	}
	if childName(long, "placeholder-1") == childName(long[:len(long)-1], "placeholder-1") {
		t.Error("two long names shortened alike")
	}
}

func TestHoldsRoom(t *testing.T) {
	at := func(minutes int) time.Time {
		return time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC).Add(time.Duration(minutes) * time.Minute)
	}
	session := &timetable.Session{WarmupStart: at(-10), Start: at(0), End: at(90)}
	cases := map[string]struct {
		now   time.Time
		next  *timetable.Session
		phase v1alpha1.CoursePhase
		want  bool
	}{
		"before the warm-up":                     {now: at(-11), next: session, phase: v1alpha1.CourseInTerm},
		"the warm-up's first instant":            {now: at(-10), next: session, phase: v1alpha1.CourseInTerm, want: true},
		"in the session":                         {now: at(45), next: session, phase: v1alpha1.CourseInTerm, want: true},
		"at its end":                             {now: at(90), next: session, phase: v1alpha1.CourseInTerm},
		"no session left":                        {now: at(45), phase: v1alpha1.CourseInTerm},
		"in the warm-up, but the term is over":   {now: at(-5), next: session, phase: v1alpha1.CourseEnded},
		"in the warm-up, before the term starts": {now: at(-5), next: session, phase: v1alpha1.CourseUpcoming},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := holdsRoom(timetable.Result{Next: tc.next}, tc.now, tc.phase); got != tc.want {
				t.Errorf("holdsRoom = %v, want %v", got, tc.want)
			}
		})
	}
}
