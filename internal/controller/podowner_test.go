package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/internal/controller"
)

// A pod of its Deployment's own second is trusted as the Deployment's only
// when the API server shows its ReplicaSet is that Deployment's. The
// ReplicaSets and pods are kube-controller-manager's own; the reads are
// made with the controller's generated ClusterRole, so this also proves
// it may read them.
func TestPodOwnedByItsDeploymentThroughItsReplicaSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	reader, err := client.New(controllerConfig(t), client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	deploy := func(name string) *appsv1.Deployment {
		labels := map[string]string{"app": name}
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.org/app:1"}}},
				},
			},
		}
		create(t, dep)
		return dep
	}
	podOf := func(dep *appsv1.Deployment) *corev1.Pod {
		var pod *corev1.Pod
		env.Eventually(t, time.Minute, "a pod of "+dep.Name, func(ctx context.Context) (bool, error) {
			var pods corev1.PodList
			if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(dep.Spec.Selector.MatchLabels)); err != nil || len(pods.Items) == 0 {
				return false, err
			}
			pod = &pods.Items[0]
			return true, nil
		})
		return pod
	}
	a, b := deploy("a"), deploy("b")
	podA := podOf(a)
	// A pod that names a's ReplicaSet but another object of that name (the
	// ReplicaSet deleted and made again): made by hand, never admitted by
	// any ReplicaSet.
	forged := podA.DeepCopy()
	forged.OwnerReferences[0].UID = types.UID("00000000-0000-0000-0000-000000000000")
	tests := map[string]struct {
		pod  *corev1.Pod
		dep  *appsv1.Deployment
		want bool
	}{
		"its own Deployment's pod":                {podA, a, true},
		"another Deployment's pod":                {podA, b, false},
		"a pod naming a ReplicaSet by an old UID": {forged, a, false},
		"a pod with no controller (made by hand)": {withoutOwners(podA), a, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, controller.OwnedBy(ctx, reader, tc.pod, tc.dep)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func withoutOwners(pod *corev1.Pod) *corev1.Pod {
	p := pod.DeepCopy()
	p.OwnerReferences = nil
	return p
}
