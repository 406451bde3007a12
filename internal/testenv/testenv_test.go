package testenv_test

import (
	"context"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/internal/testenv"
)

var env *testenv.Environment

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Mode: testenv.Full}, &env))
}

func web(ns string) (*appsv1.Deployment, *corev1.Service) {
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "nginx:1.27",
					Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				}}},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}},
		},
	}
	return dep, svc
}

func TestDeploymentBecomesAvailableWithReadyPodsAndEndpoints(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	dep, svc := web(ns)
	for _, obj := range []client.Object{dep, svc} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T: %v", obj, err)
		}
	}

	env.Eventually(t, 2*time.Minute, "deployment available", func(ctx context.Context) (bool, error) {
		var got appsv1.Deployment
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dep), &got); err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
				return got.Status.ReadyReplicas == 2, nil
			}
		}
		return false, nil
	})

	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"}); err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("got %d pods, want 2", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			t.Errorf("pod %s was not scheduled", p.Name)
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			t.Errorf("pod %s: phase %s, IP %q; want Running with an IP", p.Name, p.Status.Phase, p.Status.PodIP)
		}
	}

	env.Eventually(t, time.Minute, "endpointslice filled", func(ctx context.Context) (bool, error) {
		var slices discoveryv1.EndpointSliceList
		if err := env.Client.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: "web"}); err != nil {
			return false, err
		}
		ready := 0
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					ready++
				}
			}
		}
		return ready == 2, nil
	})
}

func TestDeletingOwnerGarbageCollectsDependents(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)

	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	if err := env.Client.Create(ctx, owner); err != nil {
		t.Fatalf("creating owner: %v", err)
	}
	dep, _ := web(ns)
	dep.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
	if err := env.Client.Create(ctx, dep); err != nil {
		t.Fatalf("creating dependent deployment: %v", err)
	}
	env.Eventually(t, 2*time.Minute, "pods created", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		err := env.Client.List(ctx, &pods, client.InNamespace(ns))
		return len(pods.Items) == 2, err
	})

	if err := env.Client.Delete(ctx, owner); err != nil {
		t.Fatalf("deleting owner: %v", err)
	}
	env.Eventually(t, 2*time.Minute, "deployment, replicaset and pods collected", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(dep), &appsv1.Deployment{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		var rs appsv1.ReplicaSetList
		var pods corev1.PodList
		if err := env.Client.List(ctx, &rs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return len(rs.Items) == 0 && len(pods.Items) == 0, nil
	})
}

func TestNamespacesAreUniquePerTest(t *testing.T) {
	a, b := env.Namespace(t), env.Namespace(t)
	if a == b {
		t.Fatalf("two calls returned the same namespace %q", a)
	}
	var ns corev1.Namespace
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: a}, &ns); err != nil {
		t.Fatalf("namespace %s was not created: %v", a, err)
	}
}
