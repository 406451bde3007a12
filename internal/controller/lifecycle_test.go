package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/userland-dev/userland/api/v1alpha1"
)

var t0 = time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time { return ptr.To(t0.Add(d)) }

func TestDecideIdle(t *testing.T) {
	t.Parallel()
	thirty := 30 * time.Minute
	cases := map[string]struct {
		in   IdleInput
		want IdleDecision
	}{
		"no timeout runs forever": {
			IdleInput{Now: t0.Add(1000 * time.Hour), StartedAt: t0},
			IdleDecision{Running: true},
		},
		"requeues at the exact deadline from the start": {
			IdleInput{Now: t0.Add(10 * time.Minute), StartedAt: t0, Timeout: &thirty},
			IdleDecision{Running: true, RequeueAfter: 20 * time.Minute},
		},
		"activity after the start moves the deadline": {
			IdleInput{Now: t0.Add(40 * time.Minute), StartedAt: t0, LastActivity: at(25 * time.Minute), Timeout: &thirty},
			IdleDecision{Running: true, RequeueAfter: 15 * time.Minute},
		},
		"activity before the start does not count": {
			IdleInput{Now: t0.Add(29 * time.Minute), StartedAt: t0, LastActivity: at(-time.Hour), Timeout: &thirty},
			IdleDecision{Running: true, RequeueAfter: time.Minute},
		},
		"stops at the deadline": {
			IdleInput{Now: t0.Add(30 * time.Minute), StartedAt: t0, Timeout: &thirty},
			IdleDecision{Stop: true},
		},
		"warns WarnBefore ahead: waits for the warning first": {
			IdleInput{Now: t0.Add(10 * time.Minute), StartedAt: t0, Timeout: &thirty, WarnBefore: 5 * time.Minute},
			IdleDecision{Running: true, RequeueAfter: 15 * time.Minute},
		},
		"within the warning: the stop time, and waits for the deadline": {
			IdleInput{Now: t0.Add(26 * time.Minute), StartedAt: t0, Timeout: &thirty, WarnBefore: 5 * time.Minute},
			IdleDecision{Running: true, StopAt: at(30 * time.Minute), RequeueAfter: 4 * time.Minute},
		},
		"activity during the warning ends it": {
			IdleInput{Now: t0.Add(27 * time.Minute), StartedAt: t0, LastActivity: at(27 * time.Minute), Timeout: &thirty, WarnBefore: 5 * time.Minute},
			IdleDecision{Running: true, RequeueAfter: 25 * time.Minute},
		},
		"stays stopped without new activity": {
			IdleInput{Now: t0.Add(5 * time.Hour), StartedAt: t0, LastActivity: at(time.Minute), IdleStoppedAt: at(31 * time.Minute), Timeout: &thirty},
			IdleDecision{},
		},
		"wakes on activity after the stop": {
			IdleInput{Now: t0.Add(5 * time.Hour), StartedAt: t0, LastActivity: at(5 * time.Hour), IdleStoppedAt: at(31 * time.Minute), Timeout: &thirty},
			IdleDecision{Running: true, Wake: true},
		},
		// Both times are stored in whole seconds: a wake in the second of
		// the stop (a user back at once) must not look older than it.
		"wakes on activity in the same second as the stop": {
			IdleInput{Now: t0.Add(31 * time.Minute), StartedAt: t0, LastActivity: at(31 * time.Minute), IdleStoppedAt: at(31 * time.Minute), Timeout: &thirty},
			IdleDecision{Running: true, Wake: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DecideIdle(tc.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWarnBefore(t *testing.T) {
	t.Parallel()
	idle := func(timeout time.Duration, warn *time.Duration) *v1alpha1.IdleSpec {
		s := &v1alpha1.IdleSpec{Timeout: metav1.Duration{Duration: timeout}}
		if warn != nil {
			s.WarnBefore = &metav1.Duration{Duration: *warn}
		}
		return s
	}
	for _, tc := range []struct {
		name string
		spec *v1alpha1.IdleSpec
		want time.Duration
	}{
		{"no idle stop, no warning", nil, 0},
		{"default", idle(time.Hour, nil), DefaultWarnBefore},
		{"the template's own", idle(time.Hour, ptr.To(10*time.Minute)), 10 * time.Minute},
		{"at most half the timeout", idle(4*time.Minute, nil), 2 * time.Minute},
		{"zero turns it off", idle(time.Hour, ptr.To(time.Duration(0))), 0},
	} {
		if got := WarnBefore(tc.spec); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestDecideRollout(t *testing.T) {
	t.Parallel()
	running := func(policy v1alpha1.RolloutPolicy, lastActive time.Duration, budget bool) RolloutInput {
		return RolloutInput{
			Policy: policy, Outdated: true, WasRunning: true, Running: true,
			Now: t0, LastActive: t0.Add(lastActive), IdleAfter: 10 * time.Minute, BudgetAvailable: budget,
		}
	}
	cases := map[string]struct {
		in   RolloutInput
		want RolloutDecision
	}{
		"up to date":                       {RolloutInput{Policy: v1alpha1.RolloutOnRestart}, RolloutDecision{Apply: true}},
		"stopped environments update free": {RolloutInput{Policy: v1alpha1.RolloutOnRestart, Outdated: true}, RolloutDecision{Apply: true}},
		"starting environments update free": {
			RolloutInput{Policy: v1alpha1.RolloutOnRestart, Outdated: true, Running: true}, RolloutDecision{Apply: true},
		},
		"stopping environments update free": {
			RolloutInput{Policy: v1alpha1.RolloutOnRestart, Outdated: true, WasRunning: true}, RolloutDecision{Apply: true},
		},
		"OnRestart waits":               {running(v1alpha1.RolloutOnRestart, 0, true), RolloutDecision{}},
		"Immediate within budget":       {running(v1alpha1.RolloutImmediate, 0, true), RolloutDecision{Apply: true, Restart: true}},
		"Immediate over budget waits":   {running(v1alpha1.RolloutImmediate, 0, false), RolloutDecision{}},
		"WhenIdle busy waits until due": {running(v1alpha1.RolloutWhenIdle, -4*time.Minute, true), RolloutDecision{RequeueAfter: 6 * time.Minute}},
		"WhenIdle idle applies":         {running(v1alpha1.RolloutWhenIdle, -10*time.Minute, true), RolloutDecision{Apply: true, Restart: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DecideRollout(tc.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestObserveHealth(t *testing.T) {
	t.Parallel()
	available := &appsv1.Deployment{
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
		Status: appsv1.DeploymentStatus{
			Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}},
		},
	}
	changed := available.DeepCopy()
	changed.Generation = 2
	changed.Status.ObservedGeneration = 1
	waiting := func(reason string) corev1.Pod {
		return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "details"}},
		}}}}
	}
	// Created, its pod Ready, but the Deployment controller has not yet
	// said Available.
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	created := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
	created.CreationTimestamp = metav1.NewTime(t0)
	created.Spec.Template.Annotations = map[string]string{AnnotationTemplateHash: "h2"}
	restarting := created.DeepCopy()
	restarting.Spec.Template.Annotations[v1alpha1.AnnotationRestartedAt] = "2026-11-25T10:00:00Z"
	pod := func(hash string, ready bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationTemplateHash: hash}, CreationTimestamp: metav1.NewTime(t0.Add(time.Second))}}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		return p
	}
	older := func(p corev1.Pod, by time.Duration) corev1.Pod {
		p.CreationTimestamp = metav1.NewTime(p.CreationTimestamp.Add(-by - time.Second))
		return p
	}
	leaving := pod("h1", true)
	leaving.DeletionTimestamp = &metav1.Time{}
	starting := Health{v1alpha1.PhaseStarting, "Starting", "waiting for the environment's pod to become ready"}
	ready := Health{v1alpha1.PhaseReady, "Ready", "the environment is serving"}
	cases := map[string]struct {
		dep  *appsv1.Deployment
		pods []corev1.Pod
		want Health
	}{
		"its current pod Ready before the Deployment says Available": {created, []corev1.Pod{pod("h2", true)}, ready},
		"a terminating old pod does not count":                       {created, []corev1.Pod{pod("h2", true), leaving}, ready},
		"current pod not Ready yet":                                  {created, []corev1.Pod{pod("h2", false)}, starting},
		"an old pod still there":                                     {created, []corev1.Pod{pod("h1", true), pod("h2", true)}, starting},
		"only the old pod, Ready":                                    {created, []corev1.Pod{pod("h1", true)}, starting},
		"a restart asked for, the old pod still Ready":               {restarting, []corev1.Pod{pod("h2", true)}, starting},
		"a pod without the hash (made by hand)":                      {created, []corev1.Pod{pod("", true)}, starting},
		"a pod older than the Deployment (a namesake's, going)":      {created, []corev1.Pod{older(pod("h2", true), 0)}, starting},
		"a pod of the Deployment's own second":                       {created, []corev1.Pod{older(pod("h2", true), 0)}, starting},
		"no deployment yet":                                          {nil, nil, Health{v1alpha1.PhaseStarting, "Starting", "waiting for the environment's pod to become ready"}},
		"available":                                                  {available, nil, Health{v1alpha1.PhaseReady, "Ready", "the environment is serving"}},
		"spec not yet observed": {changed, nil,
			Health{v1alpha1.PhaseStarting, "Starting", "waiting for the environment's pod to become ready"}},
		"image pull": {available, []corev1.Pod{waiting("ImagePullBackOff")},
			Health{v1alpha1.PhaseFailed, "ImagePullBackOff", "container app: the image could not be pulled (details)"}},
		"crash loop": {available, []corev1.Pod{waiting("CrashLoopBackOff")},
			Health{v1alpha1.PhaseFailed, "CrashLoopBackOff", "container app: the container keeps crashing (details)"}},
		"still creating is not a failure": {changed, []corev1.Pod{waiting("ContainerCreating")},
			Health{v1alpha1.PhaseStarting, "Starting", "waiting for the environment's pod to become ready"}},
		"unschedulable": {changed, []corev1.Pod{{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes have enough memory",
		}}}}}, Health{v1alpha1.PhaseFailed, "Unschedulable", "no node can run the environment: 0/3 nodes have enough memory"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ObserveHealth(tc.dep, tc.pods, nil)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A pod of the Deployment's own second counts as its current pod only when
// its ReplicaSet was read and shown to be the Deployment's (owned); the
// read itself is tested against the real API server.
func TestObserveHealthTrustsAPodOfTheSameSecondOnlyWhenOwned(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	dep := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
	dep.CreationTimestamp = metav1.NewTime(t0)
	dep.Spec.Template.Annotations = map[string]string{AnnotationTemplateHash: "h2"}
	pod := func(uid types.UID, ready bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid, Annotations: map[string]string{AnnotationTemplateHash: "h2"}, CreationTimestamp: metav1.NewTime(t0)}}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		return p
	}
	later := pod("new", true)
	later.CreationTimestamp = metav1.NewTime(t0.Add(time.Second))
	starting := Health{v1alpha1.PhaseStarting, "Starting", "waiting for the environment's pod to become ready"}
	ready := Health{v1alpha1.PhaseReady, "Ready", "the environment is serving"}
	tests := map[string]struct {
		pods  []corev1.Pod
		owned map[types.UID]bool
		want  Health
	}{
		"shown to be the Deployment's":                  {[]corev1.Pod{pod("p", true)}, map[types.UID]bool{"p": true}, ready},
		"not shown (unread, or another's)":              {[]corev1.Pod{pod("p", true)}, nil, starting},
		"another pod of that second not shown":          {[]corev1.Pod{pod("p", true), pod("q", false)}, map[types.UID]bool{"p": true}, starting},
		"shown, but not Ready":                          {[]corev1.Pod{pod("p", false)}, map[types.UID]bool{"p": true}, starting},
		"a later pod beside one of that second unshown": {[]corev1.Pod{later, pod("p", true)}, nil, starting},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ObserveHealth(dep, tc.pods, tc.owned)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodTemplateMountsVolumesWhereTheTemplateSays(t *testing.T) {
	t.Parallel()
	ul := &v1alpha1.Userland{}
	ul.Name, ul.Namespace, ul.Spec.User = "hanako", "db-course", "hanako@uni.example.ac.jp"
	spec := &v1alpha1.TemplateSpec{
		PodTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "phpmyadmin", Env: []corev1.EnvVar{{Name: "PMA_HOST", Value: "127.0.0.1"}}},
			{Name: "mariadb"},
		}}},
		HTTP:    v1alpha1.HTTPSpec{Port: 80, Routing: v1alpha1.RoutingPath},
		Volumes: []v1alpha1.VolumeSpec{{Name: "database", MountPath: "/var/lib/mysql", Containers: []string{"mariadb"}}},
	}
	pod := PodTemplate(ul, spec, Routes{})
	if got := pod.Spec.Containers[0].VolumeMounts; len(got) != 0 {
		t.Errorf("phpmyadmin mounts %v; the volume is for mariadb only", got)
	}
	if diff := cmp.Diff([]corev1.VolumeMount{{Name: "userland-database", MountPath: "/var/lib/mysql"}}, pod.Spec.Containers[1].VolumeMounts); diff != "" {
		t.Errorf("mariadb mounts (-want +got):\n%s", diff)
	}
	if got := pod.Spec.Containers[0].Env[len(pod.Spec.Containers[0].Env)-1]; got.Name != "PMA_HOST" {
		t.Errorf("template variables must follow the identity ones so $(USERLAND_*) expands; last is %s", got.Name)
	}
	if spec.PodTemplate.Spec.Containers[1].VolumeMounts != nil {
		t.Error("PodTemplate mutated the template it was given")
	}
	again := PodTemplate(ul, spec, Routes{})
	if pod.Annotations[AnnotationTemplateHash] != again.Annotations[AnnotationTemplateHash] {
		t.Error("the template hash is not stable")
	}
}
