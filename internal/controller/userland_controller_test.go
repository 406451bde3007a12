package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/controller"
)

func TestCreateBecomesReadyWithAllChildren(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	create(t, template(ns, "vscode", "example.org/code:1"), userland(ns, "taro", "Taro.Yamada@uni.example.ac.jp", "vscode"))

	ul := env.WaitPhase(t, ns, "taro", v1alpha1.PhaseReady)
	if want := gatewayURL + "/u/" + ns + "/taro/"; ul.Status.URL != want {
		t.Errorf("status.url = %q, want %q", ul.Status.URL, want)
	}
	for _, typ := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionTemplateResolved, v1alpha1.ConditionUpToDate} {
		if c := condition(ul, typ); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("condition %s = %+v, want True", typ, c)
		}
	}

	key := client.ObjectKey{Namespace: ns, Name: "taro"}
	wantLabels := map[string]string{v1alpha1.LabelManagedBy: "userland", v1alpha1.LabelUserland: "taro"}
	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, key, &dep); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantLabels, dep.Labels); diff != "" {
		t.Errorf("deployment labels (-want +got):\n%s", diff)
	}
	if !metav1.IsControlledBy(&dep, ul) {
		t.Error("deployment is not controlled by the userland")
	}
	if *dep.Spec.Replicas != 1 || dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("deployment replicas %d strategy %s, want 1 and Recreate", *dep.Spec.Replicas, dep.Spec.Strategy.Type)
	}
	pod := dep.Spec.Template.Spec
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("service-account token is mounted; the template did not ask for it")
	}
	gotEnv := map[string]string{}
	for _, e := range pod.Containers[0].Env {
		gotEnv[e.Name] = e.Value
	}
	wantEnv := map[string]string{
		"USERLAND_USER": "Taro.Yamada@uni.example.ac.jp", "USERLAND_NAME": "taro", "USERLAND_NAMESPACE": ns,
		"USERLAND_BASE_PATH": "/u/" + ns + "/taro/", "USERLAND_URL": gatewayURL + "/u/" + ns + "/taro/",
	}
	if diff := cmp.Diff(wantEnv, gotEnv); diff != "" {
		t.Errorf("identity environment (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.VolumeMount{{Name: "userland-home", MountPath: "/home/user"}}, pod.Containers[0].VolumeMounts); diff != "" {
		t.Errorf("volume mounts (-want +got):\n%s", diff)
	}

	var svc corev1.Service
	if err := env.Client.Get(ctx, key, &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Ports[0].Port != 8080 || !metav1.IsControlledBy(&svc, ul) || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("service port %d controlled=%v clusterIP %q, want 8080, owned and headless", svc.Spec.Ports[0].Port, metav1.IsControlledBy(&svc, ul), svc.Spec.ClusterIP)
	}
	var np networkingv1.NetworkPolicy
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sharedPolicy("vscode")}, &np); err != nil {
		t.Fatal(err)
	}
	// One peer with both selectors: gateway pods of the gateway's namespace
	// only, not a pod elsewhere that copies the gateway's labels.
	wantFrom := []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "userland-system"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "userland-gateway"}},
	}}
	if diff := cmp.Diff(wantFrom, np.Spec.Ingress[0].From); diff != "" {
		t.Errorf("network policy admits (-want +got):\n%s", diff)
	}
	var pvc corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "taro-home"}, &pvc); err != nil {
		t.Fatal(err)
	}
	if len(pvc.OwnerReferences) != 0 {
		t.Errorf("retained claim has owners %v; it must outlive the userland", pvc.OwnerReferences)
	}
	if pvc.Labels[controller.LabelUser] != controller.UserHash("Taro.Yamada@uni.example.ac.jp") {
		t.Errorf("claim user label %q", pvc.Labels[controller.LabelUser])
	}

	env.Eventually(t, 30*time.Second, "template counts its userlands", func(ctx context.Context) (bool, error) {
		var tmpl v1alpha1.Template
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vscode"}, &tmpl); err != nil {
			return false, err
		}
		want := v1alpha1.TemplateStatus{ObservedGeneration: tmpl.Generation, Userlands: 1, ReadyUserlands: 1,
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionUpToDate, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRolledOut,
				Message: "every environment runs the current template", ObservedGeneration: tmpl.Generation}}}
		return cmp.Equal(want, tmpl.Status, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")), nil
	})
}

func TestChangingTemplateRefIsRolledOut(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	other := template(ns, "jupyter", "example.org/jupyter:1")
	other.Spec.Rollout.Policy = v1alpha1.RolloutImmediate
	create(t, template(ns, "vscode", "example.org/code:1"), other, userland(ns, "u", "alice", "vscode"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ul, err := get(t, ctx, ns, "u")
		if err != nil {
			return err
		}
		ul.Spec.TemplateRef.Name = "jupyter"
		return env.Client.Update(ctx, ul)
	})
	if err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "switched to the new template", func(ctx context.Context) (bool, error) {
		ul, err := get(t, ctx, ns, "u")
		return err == nil && ul.Status.Phase == v1alpha1.PhaseReady && ul.Status.ObservedGeneration == ul.Generation &&
			imageOf(t, ctx, ns, "u") == "example.org/jupyter:1", err
	})
	env.Eventually(t, 30*time.Second, "both templates recounted", func(ctx context.Context) (bool, error) {
		var before, after v1alpha1.Template
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vscode"}, &before); err != nil {
			return false, err
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "jupyter"}, &after); err != nil {
			return false, err
		}
		return before.Status.Userlands == 0 && after.Status.Userlands == 1 && after.Status.ReadyUserlands == 1, nil
	})
}

func TestSuspendAndResume(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ns := env.Namespace(t)
	create(t, template(ns, "t", "example.org/app:1"), userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)

	setSuspend(t, ns, "u", true)
	waitStopped(t, ns, "u", v1alpha1.StoppedSuspended)

	setSuspend(t, ns, "u", false)
	ul := env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	if ul.Status.StoppedReason != "" {
		t.Errorf("stoppedReason = %q after resume, want empty", ul.Status.StoppedReason)
	}
}

func TestDeletionKeepsRetainedVolumesForTheSameUserOnly(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	tmpl := template(ns, "t", "example.org/app:1")
	tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, v1alpha1.VolumeSpec{Name: "scratch", MountPath: "/tmp/scratch", ReclaimPolicy: v1alpha1.ReclaimDelete})
	create(t, tmpl, userland(ns, "u", "alice", "t"))
	ul := env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	var home corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "u-home"}, &home); err != nil {
		t.Fatal(err)
	}

	if err := env.Client.Delete(ctx, ul, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "owned children collected", func(ctx context.Context) (bool, error) {
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "u"}, obj); !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "u-scratch"}, &corev1.PersistentVolumeClaim{})
		if !apierrors.IsNotFound(err) {
			return false, err
		}
		return true, nil
	})
	var kept corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "u-home"}, &kept); err != nil {
		t.Fatalf("retained claim is gone: %v", err)
	}
	if kept.UID != home.UID {
		t.Fatal("retained claim was recreated")
	}

	// Someone else under the same name must not get alice's data.
	create(t, userland(ns, "u", "mallory", "t"))
	ul = env.WaitPhase(t, ns, "u", v1alpha1.PhaseFailed)
	if c := condition(ul, v1alpha1.ConditionReady); c == nil || c.Reason != "VolumeConflict" {
		t.Errorf("Ready condition %+v, want reason VolumeConflict", c)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "u"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("a deployment was created for the conflicting user (err %v)", err)
	}
	if err := env.Client.Delete(ctx, ul); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, 30*time.Second, "conflicting userland gone", func(ctx context.Context) (bool, error) {
		_, err := get(t, ctx, ns, "u")
		return apierrors.IsNotFound(err), nil
	})

	// The same user coming back adopts the claim.
	create(t, userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "u-home"}, &kept); err != nil || kept.UID != home.UID {
		t.Fatalf("claim after return: uid %s (err %v), want the original %s", kept.UID, err, home.UID)
	}
}

func TestMissingTemplateIsReportedThenRecovers(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ns := env.Namespace(t)
	create(t, userland(ns, "u", "alice", "later"))
	env.Eventually(t, 30*time.Second, "TemplateNotFound", func(ctx context.Context) (bool, error) {
		ul, err := get(t, ctx, ns, "u")
		if err != nil {
			return false, err
		}
		c := condition(ul, v1alpha1.ConditionTemplateResolved)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonTemplateNotFound &&
			ul.Status.Phase == v1alpha1.PhasePending, nil
	})
	create(t, template(ns, "later", "example.org/app:1"))
	ul := env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	if c := condition(ul, v1alpha1.ConditionTemplateResolved); c.Status != metav1.ConditionTrue {
		t.Errorf("TemplateResolved = %+v after the template appeared", c)
	}
}

// podOf returns the environment's pod.
func podOf(t *testing.T, ctx context.Context, ns, name string) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelUserland: name}); err != nil {
		return nil, err
	}
	if len(pods.Items) != 1 {
		return nil, nil
	}
	return &pods.Items[0], nil
}

func TestPodThatCannotStartIsFailedThenRecovers(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	create(t, template(ns, "t", "example.org/app:1"), userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)

	// Simulate the kubelet failing to pull the image, as kwok cannot.
	pod, err := podOf(t, ctx, ns, "u")
	if err != nil || pod == nil {
		t.Fatalf("finding the pod: %v", err)
	}
	failing := pod.DeepCopy()
	failing.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "web", Image: "example.org/app:1", Ready: false,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "ImagePullBackOff", Message: `Back-off pulling image "example.org/app:1"`,
		}},
	}}
	if err := env.Client.Status().Update(ctx, failing); err != nil {
		t.Fatalf("marking pod failed: %v", err)
	}
	ul := env.WaitPhase(t, ns, "u", v1alpha1.PhaseFailed)
	c := condition(ul, v1alpha1.ConditionReady)
	if c.Reason != "ImagePullBackOff" || !strings.Contains(c.Message, "the image could not be pulled") {
		t.Errorf("Ready condition %+v, want ImagePullBackOff explained in plain words", c)
	}

	// Recovery: the pod is replaced and becomes ready.
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
}

func TestIdleStopAndWake(t *testing.T) {
	ctrl := startController(t)
	ns := env.Namespace(t)
	tmpl := template(ns, "t", "example.org/app:1")
	tmpl.Spec.Idle = &v1alpha1.IdleSpec{Timeout: metav1.Duration{Duration: 5 * time.Minute}}
	create(t, tmpl, userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)

	started := env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	if started.Status.IdleStopTime != nil {
		t.Fatalf("warned of an idle stop at the start: %v", started.Status.IdleStopTime)
	}

	// Four minutes on: not idle yet, but within the warning (by default
	// half of a 5m timeout) the stop time is published, with an event.
	ctrl.clock.Step(4 * time.Minute)
	poke(t, ns, "u")
	var warned *v1alpha1.Userland
	env.Eventually(t, 30*time.Second, "idle warning", func(ctx context.Context) (bool, error) {
		var err error
		warned, err = get(t, ctx, ns, "u")
		return err == nil && warned.Status.IdleStopTime != nil, err
	})
	if warned.Status.Phase != v1alpha1.PhaseReady || warned.Status.StoppedReason != "" {
		t.Fatalf("stopped after 4 of 5 minutes: %s %q", warned.Status.Phase, warned.Status.StoppedReason)
	}
	if left := warned.Status.IdleStopTime.Sub(ctrl.clock.Now()); left <= 0 || left > time.Minute+time.Second {
		t.Errorf("idle stop in %s by the controller's clock, want within a minute", left)
	}
	env.Eventually(t, 30*time.Second, "IdleStopSoon event", func(ctx context.Context) (bool, error) {
		var events eventsv1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == "IdleStopSoon" && e.Regarding.Name == "u" {
				return true, nil
			}
		}
		return false, nil
	})

	// Someone uses it: the warning goes.
	recordActivity(t, warned, ctrl.clock.Now())
	env.Eventually(t, 30*time.Second, "warning cleared by activity", func(ctx context.Context) (bool, error) {
		ul, err := get(t, ctx, ns, "u")
		return err == nil && ul.Status.IdleStopTime == nil, err
	})

	// Past the timeout from that activity: stopped for idleness.
	ctrl.clock.Step(6 * time.Minute)
	poke(t, ns, "u")
	ul := waitStopped(t, ns, "u", v1alpha1.StoppedIdle)
	if ul.Status.IdleStopTime != nil {
		t.Errorf("stopped, yet still warning of a stop at %v", ul.Status.IdleStopTime)
	}

	// Activity after the stop (as the gateway records it) wakes it.
	ctrl.clock.Step(time.Minute)
	recordActivity(t, ul, ctrl.clock.Now())
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
}

// recordActivity writes activity as the gateway does.
func recordActivity(t *testing.T, ul *v1alpha1.Userland, at time.Time) {
	t.Helper()
	patch := client.MergeFrom(ul.DeepCopy())
	ul.Status.LastActivityTime = &metav1.Time{Time: at}
	ul.Status.LastActivitySource = v1alpha1.ActivityWebSocket
	if err := env.Client.Status().Patch(context.Background(), ul, patch); err != nil {
		t.Fatal(err)
	}
}

// TestStartActionWakesAnIdleStoppedEnvironment: the dashboard's and the
// plugin's Start needs no status write; its restarted-at stamp counts as
// activity.
func TestStartActionWakesAnIdleStoppedEnvironment(t *testing.T) {
	ctrl := startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	tmpl := template(ns, "t", "example.org/app:1")
	tmpl.Spec.Idle = &v1alpha1.IdleSpec{Timeout: metav1.Duration{Duration: 5 * time.Minute}}
	create(t, tmpl, userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	ctrl.clock.Step(6 * time.Minute)
	poke(t, ns, "u")
	ul := waitStopped(t, ns, "u", v1alpha1.StoppedIdle)

	ctrl.clock.Step(time.Minute)
	patch, err := actions.Patch(actions.Start, actions.Staff, ul, ctrl.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(ctx, ul, patch); err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
}

// setImage changes a template's image.
func setImage(t *testing.T, ns, name, image string) {
	t.Helper()
	updateTemplate(t, ns, name, func(tmpl *v1alpha1.Template) { tmpl.Spec.PodTemplate.Spec.Containers[0].Image = image })
}

// updateTemplate changes a template, retrying when the controller's
// concurrent status writes win the race.
func updateTemplate(t *testing.T, ns, name string, change func(*v1alpha1.Template)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var tmpl v1alpha1.Template
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &tmpl); err != nil {
			return err
		}
		change(&tmpl)
		return env.Client.Update(context.Background(), &tmpl)
	})
	if err != nil {
		t.Fatalf("updating template %s/%s: %v", ns, name, err)
	}
}

// waitNameConflict waits for a Userland to fail because a child's name is
// taken.
func waitNameConflict(t *testing.T, ns, name string) {
	t.Helper()
	ul := env.WaitPhase(t, ns, name, v1alpha1.PhaseFailed)
	if c := condition(ul, v1alpha1.ConditionReady); c == nil || c.Reason != "NameConflict" {
		t.Errorf("%s: Ready condition %+v, want reason NameConflict", name, c)
	}
}

func imageOf(t *testing.T, ctx context.Context, ns, name string) string {
	t.Helper()
	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
		return ""
	}
	return dep.Spec.Template.Spec.Containers[0].Image
}

func waitPending(t *testing.T, ns, name string) {
	t.Helper()
	env.Eventually(t, 30*time.Second, "update pending", func(ctx context.Context) (bool, error) {
		ul, err := get(t, ctx, ns, name)
		if err != nil {
			return false, err
		}
		c := condition(ul, v1alpha1.ConditionUpToDate)
		return ul.Status.UpdatePending && c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonRolloutDeferred, nil
	})
}

func TestRolloutWhenIdleWaitsForInactivity(t *testing.T) {
	ctrl := startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	create(t, template(ns, "t", "example.org/app:1"), userland(ns, "busy", "alice", "t"))
	ul := env.WaitPhase(t, ns, "busy", v1alpha1.PhaseReady)
	patch := client.MergeFrom(ul.DeepCopy())
	ul.Status.LastActivityTime = &metav1.Time{Time: ctrl.clock.Now()}
	if err := env.Client.Status().Patch(ctx, ul, patch); err != nil {
		t.Fatal(err)
	}

	setImage(t, ns, "t", "example.org/app:2")
	waitPending(t, ns, "busy")
	if got := imageOf(t, ctx, ns, "busy"); got != "example.org/app:1" {
		t.Fatalf("a busy environment was restarted onto %s", got)
	}
	waitTemplateUpToDate(t, ns, "t", metav1.ConditionFalse, v1alpha1.ReasonUpdatesPending)
	// A new Userland always gets the current template.
	create(t, userland(ns, "new", "bob", "t"))
	env.WaitPhase(t, ns, "new", v1alpha1.PhaseReady)
	if got := imageOf(t, ctx, ns, "new"); got != "example.org/app:2" {
		t.Errorf("new userland runs %s, want the current template", got)
	}

	ctrl.clock.Step(11 * time.Minute)
	poke(t, ns, "busy")
	env.Eventually(t, time.Minute, "rolled out once idle", func(ctx context.Context) (bool, error) {
		ul, err := get(t, ctx, ns, "busy")
		return err == nil && !ul.Status.UpdatePending && imageOf(t, ctx, ns, "busy") == "example.org/app:2", err
	})
	waitTemplateUpToDate(t, ns, "t", metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
}

// waitTemplateUpToDate waits for a template's UpToDate condition.
func waitTemplateUpToDate(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	env.Eventually(t, 30*time.Second, fmt.Sprintf("template UpToDate=%s (%s)", status, reason), func(ctx context.Context) (bool, error) {
		var tmpl v1alpha1.Template
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tmpl); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(tmpl.Status.Conditions, v1alpha1.ConditionUpToDate)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == tmpl.Generation, nil
	})
}

func TestRolloutOnRestartWaitsForTheNextStart(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	tmpl := template(ns, "t", "example.org/app:1")
	tmpl.Spec.Rollout.Policy = v1alpha1.RolloutOnRestart
	create(t, tmpl, userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)

	setImage(t, ns, "t", "example.org/app:2")
	waitPending(t, ns, "u")
	if got := imageOf(t, ctx, ns, "u"); got != "example.org/app:1" {
		t.Fatalf("running environment restarted onto %s under OnRestart", got)
	}
	setSuspend(t, ns, "u", true)
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseStopped)
	setSuspend(t, ns, "u", false)
	ul := env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	if got := imageOf(t, ctx, ns, "u"); got != "example.org/app:2" || ul.Status.UpdatePending {
		t.Errorf("after restart: image %s pending %v, want app:2 and nothing pending", got, ul.Status.UpdatePending)
	}
}

func TestRestartAnnotationAppliesAPendingUpdateNow(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	tmpl := template(ns, "t", "example.org/app:1")
	tmpl.Spec.Rollout.Policy = v1alpha1.RolloutOnRestart
	create(t, tmpl, userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)

	setImage(t, ns, "t", "example.org/app:2")
	waitPending(t, ns, "u")
	patch := []byte(`{"metadata":{"annotations":{"` + v1alpha1.AnnotationRestartedAt + `":"2026-11-22T06:00:00Z"}}}`)
	if err := env.Client.Patch(ctx, &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "u"}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var ul v1alpha1.Userland
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "u"}, &ul); err != nil {
			return false, err
		}
		return !ul.Status.UpdatePending && ul.Status.Phase == v1alpha1.PhaseReady && imageOf(t, ctx, ns, "u") == "example.org/app:2", nil
	})
	if err != nil {
		t.Fatalf("restart request did not apply the pending update: %v (image %s)", err, imageOf(t, ctx, ns, "u"))
	}
	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "u"}, &dep); err != nil {
		t.Fatal(err)
	}
	if got := dep.Spec.Template.Annotations[v1alpha1.AnnotationRestartedAt]; got != "2026-11-22T06:00:00Z" {
		t.Errorf("pod template restarted-at = %q, want the requested value", got)
	}
}

func TestRolloutImmediateRespectsMaxUnavailable(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ns := env.Namespace(t)
	tmpl := template(ns, "t", "example.org/app:1")
	tmpl.Spec.Rollout = v1alpha1.RolloutSpec{Policy: v1alpha1.RolloutImmediate}
	create(t, tmpl)
	const n = 20
	for i := range n {
		create(t, userland(ns, fmt.Sprintf("u%d", i), fmt.Sprintf("user%d", i), "t"))
	}
	waitAllReady(t, ns, n, 2*time.Minute)
	env.WaitDeploymentsAvailable(t, ns, time.Minute)

	setImage(t, ns, "t", "example.org/app:2")
	// 25% of 20 running environments: at most 5 unavailable at any moment.
	maxSeen := 0
	env.Eventually(t, 2*time.Minute, "rolled out to all", func(ctx context.Context) (bool, error) {
		seen, err := env.SampleRollout(ctx, ns, "example.org/app:2")
		if err != nil {
			return false, err
		}
		maxSeen = max(maxSeen, seen.Unavailable)
		return seen.Updated == n && seen.Unavailable == 0, nil
	})
	if maxSeen > 5 {
		t.Errorf("saw %d environments unavailable at once, maxUnavailable is 5", maxSeen)
	}
	t.Logf("at most %d of %d unavailable during the rollout", maxSeen, n)
}

func TestNothingIsWrittenAfterConvergence(t *testing.T) {
	ctrl := startController(t)
	ns := env.Namespace(t)
	create(t, template(ns, "t", "example.org/app:1"))
	names := []string{"a", "b", "c", "d", "e"}
	for _, n := range names {
		create(t, userland(ns, n, "user-"+n, "t"))
	}
	for _, n := range names {
		env.WaitPhase(t, ns, n, v1alpha1.PhaseReady)
	}
	// The template's counts are batched; convergence includes them.
	env.Eventually(t, 30*time.Second, "the template counted five ready", func(ctx context.Context) (bool, error) {
		var tmpl v1alpha1.Template
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "t"}, &tmpl)
		return err == nil && tmpl.Status.Userlands == 5 && tmpl.Status.ReadyUserlands == 5, err
	})
	time.Sleep(time.Second) // the write that set them has been counted
	before := ctrl.writes.count(ns)
	time.Sleep(30 * time.Second)
	if writes := ctrl.writes.count(ns) - before; writes != 0 {
		t.Errorf("the controller wrote %d times in 30s after convergence, want 0", writes)
	}
}

func TestRestartWhileCreating200ConvergesWithoutDuplicatesOrOrphans(t *testing.T) {
	first := startController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	create(t, template(ns, "t", "example.org/app:1"))
	const n = 200
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			ul := userland(ns, fmt.Sprintf("u-%03d", i), fmt.Sprintf("user%d", i), "t")
			if err := env.Client.Create(ctx, ul); err != nil {
				t.Errorf("creating %s: %v", ul.Name, err)
			}
			if i == n/3 {
				first.stop()
			}
		}
	}()
	<-done
	startController(t)

	waitAllReady(t, ns, n, 4*time.Minute)
	var deps appsv1.DeploymentList
	var svcs corev1.ServiceList
	var pvcs corev1.PersistentVolumeClaimList
	var pods corev1.PodList
	for _, l := range []client.ObjectList{&deps, &svcs, &pvcs, &pods} {
		if err := env.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	if len(deps.Items) != n || len(svcs.Items) != n || len(pvcs.Items) != n {
		t.Errorf("children: %d deployments, %d services, %d claims; want %d each", len(deps.Items), len(svcs.Items), len(pvcs.Items), n)
	}
	running := slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	if len(running) != n {
		t.Errorf("%d pods, want one per userland (%d)", len(running), n)
	}
	for _, d := range deps.Items {
		if len(d.OwnerReferences) != 1 || d.OwnerReferences[0].Kind != "Userland" || !ptr.Deref(d.OwnerReferences[0].Controller, false) {
			t.Errorf("deployment %s has owners %v", d.Name, d.OwnerReferences)
		}
	}
}

// setSuspend sets spec.suspend, retrying when the controller's status
// writes win the race.
func setSuspend(t *testing.T, ns, name string, suspend bool) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ul, err := get(t, context.Background(), ns, name)
		if err != nil {
			return err
		}
		ul.Spec.Suspend = suspend
		return env.Client.Update(context.Background(), ul)
	})
	if err != nil {
		t.Fatalf("setting suspend=%v: %v", suspend, err)
	}
}

// waitAllReady waits until n Userlands in ns are Ready.
func waitAllReady(t *testing.T, ns string, n int, timeout time.Duration) {
	t.Helper()
	env.Eventually(t, timeout, fmt.Sprintf("%d userlands ready", n), func(ctx context.Context) (bool, error) {
		var list v1alpha1.UserlandList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		ready := 0
		for _, ul := range list.Items {
			if ul.Status.Phase == v1alpha1.PhaseReady {
				ready++
			}
		}
		return ready == n, nil
	})
}

// waitStopped waits until the Userland is Stopped and checks the reason and
// that its Deployment has no replicas.
func waitStopped(t *testing.T, ns, name string, reason v1alpha1.StoppedReason) *v1alpha1.Userland {
	t.Helper()
	ul := env.WaitPhase(t, ns, name, v1alpha1.PhaseStopped)
	if ul.Status.StoppedReason != reason {
		t.Fatalf("stoppedReason = %q, want %s", ul.Status.StoppedReason, reason)
	}
	var dep appsv1.Deployment
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ul), &dep); err != nil || *dep.Spec.Replicas != 0 {
		t.Fatalf("stopped (%s) deployment replicas %v (err %v), want 0", reason, dep.Spec.Replicas, err)
	}
	return ul
}

func TestTemplatePortChangeUpdatesTheServiceInPlace(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	create(t, template(ns, "t", "example.org/app:1"), userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	key := client.ObjectKey{Namespace: ns, Name: "u"}
	var before corev1.Service
	if err := env.Client.Get(ctx, key, &before); err != nil {
		t.Fatal(err)
	}
	// Another party's annotation must survive the controller's update.
	patch := []byte(`{"metadata":{"annotations":{"example.org/owner":"platform-team"}}}`)
	if err := env.Client.Patch(ctx, &before, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	updateTemplate(t, ns, "t", func(tmpl *v1alpha1.Template) {
		tmpl.Spec.HTTP.Port = 9090
		tmpl.Spec.PodTemplate.Spec.Containers[0].Ports[0].ContainerPort = 9090
	})
	var after corev1.Service
	env.Eventually(t, time.Minute, "the Service moved to port 9090", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, key, &after); err != nil {
			return false, err
		}
		return len(after.Spec.Ports) == 1 && after.Spec.Ports[0].Port == 9090, nil
	})
	want := corev1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 9090, TargetPort: intstr.FromInt32(9090)}
	if diff := cmp.Diff(want, after.Spec.Ports[0]); diff != "" {
		t.Errorf("service port (-want +got):\n%s", diff)
	}
	if after.UID != before.UID || after.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("the Service was replaced or got a cluster IP (uid %s→%s, IP %q); it must stay headless and be updated in place", before.UID, after.UID, after.Spec.ClusterIP)
	}
	if after.Annotations["example.org/owner"] != "platform-team" {
		t.Errorf("another party's annotation was lost: %v", after.Annotations)
	}
}

func TestServicesWithAClusterIPAreReplacedAndForeignChildrenLeftAlone(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	// "old" waits for its template, so its Service can be planted first,
	// as a controller that still made ClusterIP Services would have left it.
	create(t, userland(ns, "old", "alice", "t"))
	env.WaitPhase(t, ns, "old", v1alpha1.PhasePending)
	old, err := get(t, ctx, ns, "old")
	if err != nil {
		t.Fatal(err)
	}
	legacy := controller.Service(old, 8080, false)
	legacy.Spec.ClusterIP = ""
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	labels := map[string]string{"app": "theirs"}
	foreignDep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dtaken"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "theirs", Image: "example.org/theirs:1"}}}},
		},
	}
	create(t, legacy, foreign, foreignDep)
	if legacy.Spec.ClusterIP == "" || legacy.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Fatalf("the planted Service got cluster IP %q", legacy.Spec.ClusterIP)
	}
	create(t, template(ns, "t", "example.org/app:1"), userland(ns, "taken", "bob", "t"), userland(ns, "dtaken", "carol", "t"))

	env.WaitPhase(t, ns, "old", v1alpha1.PhaseReady)
	env.Eventually(t, time.Minute, "the legacy Service replaced by a headless one", func(ctx context.Context) (bool, error) {
		var svc corev1.Service
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "old"}, &svc)
		return err == nil && svc.UID != legacy.UID && svc.Spec.ClusterIP == corev1.ClusterIPNone, client.IgnoreNotFound(err)
	})

	waitNameConflict(t, ns, "taken")
	var still corev1.Service
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "taken"}, &still); err != nil {
		t.Fatal(err)
	}
	if still.UID != foreign.UID || len(still.OwnerReferences) != 0 || still.Spec.Ports[0].Port != 80 {
		t.Errorf("another party's Service was changed: uid %s (was %s), owners %v, port %d", still.UID, foreign.UID, still.OwnerReferences, still.Spec.Ports[0].Port)
	}
	waitNameConflict(t, ns, "dtaken")
	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dtaken"}, &dep); err != nil {
		t.Fatal(err)
	}
	if len(dep.OwnerReferences) != 0 || dep.Spec.Template.Spec.Containers[0].Image != "example.org/theirs:1" {
		t.Errorf("another party's Deployment was changed: owners %v, image %s", dep.OwnerReferences, dep.Spec.Template.Spec.Containers[0].Image)
	}
}

func TestFieldsATemplateDropsLeaveTheDeployment(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ns := env.Namespace(t)
	tmpl := template(ns, "t", "example.org/app:1")
	tmpl.Spec.Rollout.Policy = v1alpha1.RolloutImmediate
	tmpl.Spec.PodTemplate.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "THEME", Value: "dark"}, {Name: "KEEP", Value: "yes"}}
	create(t, tmpl, userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)

	updateTemplate(t, ns, "t", func(tmpl *v1alpha1.Template) {
		tmpl.Spec.PodTemplate.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KEEP", Value: "yes"}}
	})
	var dep appsv1.Deployment
	env.Eventually(t, time.Minute, "THEME removed from the Deployment", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "u"}, &dep); err != nil {
			return false, err
		}
		for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "THEME" {
				return false, nil
			}
		}
		return true, nil
	})
	var names []string
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		if !strings.HasPrefix(e.Name, "USERLAND_") {
			names = append(names, e.Name)
		}
	}
	if diff := cmp.Diff([]string{"KEEP"}, names); diff != "" {
		t.Errorf("template variables in the Deployment (-want +got):\n%s", diff)
	}
	var ours []string
	for _, m := range dep.ManagedFields {
		if m.Manager == controller.FieldOwner {
			ours = append(ours, string(m.Operation))
		}
	}
	if diff := cmp.Diff([]string{string(metav1.ManagedFieldsOperationApply)}, ours); diff != "" {
		t.Errorf("the controller's field ownership (-want +got):\n%s", diff)
	}
}
