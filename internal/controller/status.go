package controller

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/reconcile"
)

// Health is the observed state of an environment's workload.
type Health struct {
	// Phase is the Userland phase it maps to.
	Phase v1alpha1.Phase
	// Reason is a CamelCase reason for the Ready condition.
	Reason string
	// Message explains the reason in plain words.
	Message string
}

// failingWaitingReasons are container waiting reasons that mean the
// environment cannot start without someone changing something.
var failingWaitingReasons = map[string]string{
	v1alpha1.ReasonErrImagePull:               "the image could not be pulled",
	v1alpha1.ReasonImagePullBackOff:           "the image could not be pulled",
	v1alpha1.ReasonInvalidImageName:           "the image name is invalid",
	v1alpha1.ReasonCrashLoopBackOff:           "the container keeps crashing",
	v1alpha1.ReasonCreateContainerConfigError: "the container configuration is invalid",
	v1alpha1.ReasonCreateContainerError:       "the container could not be created",
	v1alpha1.ReasonRunContainerError:          "the container could not be started",
}

// ObserveHealth maps a running environment's Deployment and Pods to a
// phase. stopped environments are handled by the caller.
//
// owned are pods of the Deployment's own second that the API server shows
// are its (ownedSameSecond); nil when none is known to be.
func ObserveHealth(dep *appsv1.Deployment, pods []corev1.Pod, owned map[types.UID]bool) Health {
	if dep == nil {
		// The same words as a Deployment still starting: the children are
		// being applied in this very reconcile, and a distinct status would
		// cost every environment one more write.
		return Health{Phase: v1alpha1.PhaseStarting, Reason: v1alpha1.ReasonStarting, Message: "waiting for the environment's pod to become ready"}
	}
	for i := range pods {
		if h, failed := podFailure(&pods[i]); failed {
			return h
		}
	}
	if rolledOut(dep) || podServing(dep, pods, owned) {
		return Health{Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonReady, Message: "the environment is serving"}
	}
	return Health{Phase: v1alpha1.PhaseStarting, Reason: v1alpha1.ReasonStarting, Message: "waiting for the environment's pod to become ready"}
}

// rolledOut is true when the Deployment's controller has observed its
// current spec and every wanted replica runs that spec and is available.
// The Available condition alone is not enough: right after a spec change it
// still describes the old pods.
func rolledOut(dep *appsv1.Deployment) bool {
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	return dep.Status.ObservedGeneration >= dep.Generation &&
		dep.Status.UpdatedReplicas >= want && dep.Status.AvailableReplicas >= want &&
		dep.Status.Replicas == want && deploymentAvailable(dep)
}

// podServing is true when the environment's one pod runs the Deployment's
// current pod template and is Ready, and no other pod of it is left: what
// the Deployment's Available condition will say once the Deployment
// controller has caught up. Deciding from the pod saves that round (about
// half a second per environment in the provisioning benchmark: the pod's
// Ready event reconciles at once, the Deployment's status follows later).
// The current template is told by the annotations the pod inherits from
// it: the template hash, and the restart request, which changes the pod
// but not the hash.
func podServing(dep *appsv1.Deployment, pods []corev1.Pod, owned map[types.UID]bool) bool {
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
		return false
	}
	serving := 0
	for i := range pods {
		pod := &pods[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		// A pod made before this Deployment (the previous environment of a
		// Userland deleted and made again under the same name, still being
		// garbage-collected) can carry the same hash. Timestamps have whole
		// seconds: a pod of the same second is trusted only when its
		// ReplicaSet shows it is this Deployment's (owned); otherwise the
		// Deployment's own status decides (rolledOut).
		current := runsPodTemplate(dep, pod) &&
			(pod.CreationTimestamp.After(dep.CreationTimestamp.Time) || owned[pod.UID])
		if !current {
			return false // an old pod is still there: the change is not done
		}
		if podReady(pod) {
			serving++
		}
	}
	return serving == 1
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func deploymentAvailable(dep *appsv1.Deployment) bool {
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podFailure(pod *corev1.Pod) (Health, bool) {
	if pod.DeletionTimestamp != nil {
		return Health{}, false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return Health{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonUnschedulable,
				Message: "no node can run the environment: " + c.Message}, true
		}
	}
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if cs.State.Waiting == nil {
			continue
		}
		plain, failing := failingWaitingReasons[cs.State.Waiting.Reason]
		if !failing {
			continue
		}
		msg := fmt.Sprintf("container %s: %s", cs.Name, plain)
		if detail := strings.TrimSpace(cs.State.Waiting.Message); detail != "" {
			msg += " (" + detail + ")"
		}
		return Health{Phase: v1alpha1.PhaseFailed, Reason: cs.State.Waiting.Reason, Message: msg}, true
	}
	return Health{}, false
}

// reconcileStatus observes the phase; Ready is computed from it after
// the phases (summarize).
func (r *UserlandReconciler) reconcileStatus(ctx context.Context, s *reconcileState) (ctrl.Result, error) {
	before := s.ul.Status.Phase
	if s.notAllowed != nil {
		// Now scaled to zero, it is reported as enforceNamespaceAccess
		// reports it from the next reconcile on: the same status, so the
		// next reconcile writes nothing.
		s.ul.Status.Phase, s.ul.Status.StoppedReason = v1alpha1.PhaseFailed, ""
		return ctrl.Result{}, reconcile.Stalled(s.notAllowed.reason, s.notAllowed.message)
	}
	if !s.running {
		s.ul.Status.Phase = v1alpha1.PhaseStopped
		s.ul.Status.StoppedReason = s.stopReason
		return ctrl.Result{}, nil
	}
	s.ul.Status.StoppedReason = ""
	s.health = ObserveHealth(s.dep, s.pods, r.ownedSameSecond(ctx, s.dep, s.pods))
	s.ul.Status.Phase = s.health.Phase
	if before != s.health.Phase {
		switch s.health.Phase {
		case v1alpha1.PhaseReady:
			if startedAt := parseTime(s.dep.Annotations[AnnotationStartedAt]); startedAt != nil {
				r.Metrics.observeStart(s.now.Sub(*startedAt))
			}
		case v1alpha1.PhaseFailed:
			r.Recorder.Eventf(s.ul, nil, corev1.EventTypeWarning, s.health.Reason, "Start", s.health.Message)
		}
	}
	return ctrl.Result{}, nil
}
