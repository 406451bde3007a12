package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// parallelism is how many creates are in flight, for both sides.
const parallelism = 16

func createAll(ctx context.Context, n int, build func(i int) []client.Object, c client.Client) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range parallelism {
		wg.Go(func() {
			for i := range work {
				for _, o := range build(i) {
					if err := c.Create(ctx, o); err != nil {
						errs <- fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
					}
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

func namespace(ctx context.Context, c client.Client, name string) error {
	return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

func container(image string) corev1.Container {
	return corev1.Container{Name: "app", Image: image, Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}
}

// baseline creates n Deployments and Services directly and waits until
// every Deployment is Available: what the cluster alone can do here.
func baseline(ctx context.Context, c client.Client, n int) (time.Duration, error) {
	ns := fmt.Sprintf("baseline-%d", n)
	if err := namespace(ctx, c, ns); err != nil {
		return 0, err
	}
	start := time.Now()
	err := createAll(ctx, n, func(i int) []client.Object {
		name := fmt.Sprintf("app-%d", i)
		labels := map[string]string{"app": name}
		return []client.Object{
			&appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{container("example.org/app:1")}}},
				},
			},
			&corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
			},
		}
	}, c)
	if err != nil {
		return 0, err
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 20*time.Minute, true, func(ctx context.Context) (bool, error) {
		var list appsv1.DeploymentList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		available := 0
		for _, d := range list.Items {
			if d.Status.AvailableReplicas == 1 {
				available++
			}
		}
		return available == n, nil
	})
	return time.Since(start), err
}

func benchTemplate(ns string) *v1alpha1.Template {
	return &v1alpha1.Template{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec: v1alpha1.TemplateSpec{
			PodTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{container("example.org/app:1")}}},
			HTTP:        v1alpha1.HTTPSpec{Port: 8080},
			Rollout: v1alpha1.RolloutSpec{
				Policy:         v1alpha1.RolloutImmediate,
				MaxUnavailable: ptr.To(intstr.FromString("25%")),
			},
		},
	}
}

// provision creates n Userlands and waits until every one is Ready.
func provision(ctx context.Context, c client.Client, ns string, n int) (time.Duration, error) {
	if err := namespace(ctx, c, ns); err != nil {
		return 0, err
	}
	if err := c.Create(ctx, benchTemplate(ns)); err != nil {
		return 0, err
	}
	start := time.Now()
	err := createAll(ctx, n, func(i int) []client.Object {
		return []client.Object{&v1alpha1.Userland{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("u-%d", i)},
			Spec:       v1alpha1.UserlandSpec{User: fmt.Sprintf("student%d@uni.example.ac.jp", i), TemplateRef: v1alpha1.TemplateReference{Name: "app"}},
		}}
	}, c)
	if err != nil {
		return 0, err
	}
	err = waitUserlands(ctx, c, ns, n, func(ul *v1alpha1.Userland) bool { return ul.Status.Phase == v1alpha1.PhaseReady })
	return time.Since(start), err
}

func waitUserlands(ctx context.Context, c client.Client, ns string, n int, done func(*v1alpha1.Userland) bool) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		var list v1alpha1.UserlandList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		count := 0
		for i := range list.Items {
			if done(&list.Items[i]) {
				count++
			}
		}
		return count == n, nil
	})
}

// rollout changes the template's image and waits until every environment
// runs it and is Ready again.
func rollout(ctx context.Context, c client.Client, ns string, n int) (time.Duration, error) {
	start := time.Now()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var t v1alpha1.Template
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, &t); err != nil {
			return err
		}
		t.Spec.PodTemplate.Spec.Containers[0].Image = "example.org/app:2"
		return c.Update(ctx, &t)
	})
	if err != nil {
		return 0, err
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		var list appsv1.DeploymentList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		done := 0
		for _, d := range list.Items {
			if d.Spec.Template.Spec.Containers[0].Image == "example.org/app:2" &&
				d.Status.UpdatedReplicas == 1 && d.Status.AvailableReplicas == 1 && d.Status.Replicas == 1 {
				done++
			}
		}
		return done == n, nil
	})
	if err != nil {
		return 0, err
	}
	err = waitUserlands(ctx, c, ns, n, func(ul *v1alpha1.Userland) bool {
		return ul.Status.Phase == v1alpha1.PhaseReady && !ul.Status.UpdatePending
	})
	return time.Since(start), err
}
