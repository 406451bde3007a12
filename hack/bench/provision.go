package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/testobj"
)

// parallelism is how many creates are in flight, for both sides.
const parallelism = 16

func createAll(ctx context.Context, n int, build func(i int) []client.Object, c client.Client) error {
	return eachParallel(n, func(i int) error {
		for _, o := range build(i) {
			if err := c.Create(ctx, o); err != nil {
				return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
			}
		}
		return nil
	})
}

func namespace(ctx context.Context, c client.Client, name string) error {
	return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// deleteNamespace removes a namespace and waits until it is gone, so the
// next measurement starts from the same cluster: creating a Service costs
// the API server more the more Services exist (its cluster-IP allocator
// walks them), so leaving the baseline's Services behind would handicap
// whatever runs next.
func deleteNamespace(ctx context.Context, c client.Client, name string) (time.Duration, error) {
	start := time.Now()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Delete(ctx, ns); err != nil {
		return 0, fmt.Errorf("deleting namespace %s: %w", name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(ns), ns)
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for namespace %s to go: %w", name, err)
	}
	return time.Since(start), nil
}

// baseline creates n Deployments and Services directly and waits until
// every Deployment is Available: what the cluster alone can do here.
func baseline(ctx context.Context, c client.Client, n int, st *stages) (time.Duration, error) {
	ns := fmt.Sprintf("baseline-%d", n)
	if err := namespace(ctx, c, ns); err != nil {
		return 0, err
	}
	stop := st.follow(ctx, c, ns, false)
	defer stop()
	start := time.Now()
	template := benchTemplate(ns)
	routes := controller.Routes{GatewayURL: &url.URL{Scheme: "http", Host: gatewayHost}}
	err := createAll(ctx, n, func(i int) []client.Object {
		// The very objects the controller would build for the same
		// Userland (Recreate strategy, labels, identity variables), with
		// no owner (the Userland does not exist) and without the label
		// that puts them in the controller's cache.
		ul := benchUserland(ns, i)
		st.mark(ul.Name, stageCreated, time.Now())
		dep := controller.Deployment(ul, controller.PodTemplate(ul, &template.Spec, routes), 1, nil)
		svc := controller.Service(ul, template.Spec.HTTP.Port, true)
		for _, m := range []*metav1.ObjectMeta{&dep.ObjectMeta, &dep.Spec.Template.ObjectMeta, &svc.ObjectMeta} {
			m.OwnerReferences = nil
			delete(m.Labels, v1alpha1.LabelManagedBy)
		}
		return []client.Object{dep, svc}
	}, c)
	if err != nil {
		return 0, err
	}
	err = waitAll(ctx, c, &appsv1.DeploymentList{}, ns, n, func(obj client.Object) bool {
		return obj.(*appsv1.Deployment).Status.AvailableReplicas == 1
	})
	return time.Since(start), err
}

// benchTemplate is the template every benchmark environment runs.
func benchTemplate(ns string) *v1alpha1.Template {
	return testobj.MakeTemplate(ns, "app").Rollout(v1alpha1.RolloutImmediate, "25%").Obj()
}

func benchUserland(ns string, i int) *v1alpha1.Userland {
	return testobj.MakeUserland(ns, fmt.Sprintf("u-%d", i), fmt.Sprintf("student%d@uni.example.ac.jp", i), "app").Obj()
}

// provision creates n Userlands and waits until every one is Ready.
func provision(ctx context.Context, c client.Client, ns string, n int, st *stages) (time.Duration, error) {
	if err := namespace(ctx, c, ns); err != nil {
		return 0, err
	}
	if err := c.Create(ctx, benchTemplate(ns)); err != nil {
		return 0, err
	}
	stop := st.follow(ctx, c, ns, true)
	defer stop()
	start := time.Now()
	err := createAll(ctx, n, func(i int) []client.Object {
		ul := benchUserland(ns, i)
		st.mark(ul.Name, stageCreated, time.Now())
		return []client.Object{ul}
	}, c)
	if err != nil {
		return 0, err
	}
	err = waitUserlands(ctx, c, ns, n, func(ul *v1alpha1.Userland) bool { return ul.Status.Phase == v1alpha1.PhaseReady })
	return time.Since(start), err
}

// waitTemplateCounts waits until the bench template's status counts n
// Userlands, all Ready.
func waitTemplateCounts(ctx context.Context, c client.Client, ns string, n int) error {
	return waitAll(ctx, c, &v1alpha1.TemplateList{}, ns, 1, func(obj client.Object) bool {
		st := obj.(*v1alpha1.Template).Status
		return st.Userlands == int32(n) && st.ReadyUserlands == int32(n)
	})
}

func waitUserlands(ctx context.Context, c client.Client, ns string, n int, done func(*v1alpha1.Userland) bool) error {
	return waitAll(ctx, c, &v1alpha1.UserlandList{}, ns, n, func(obj client.Object) bool { return done(obj.(*v1alpha1.Userland)) })
}

// waitAll watches the objects of list's kind in ns until n of them are
// done. A watch, not polling: listing a thousand objects four times a
// second would load the API server the benchmark is measuring.
func waitAll(ctx context.Context, c client.Client, list client.ObjectList, ns string, n int, done func(client.Object) bool) error {
	wc, ok := c.(client.WithWatch)
	if !ok {
		return fmt.Errorf("the benchmark client cannot watch")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	state := map[string]bool{}
	count := func() int {
		k := 0
		for _, d := range state {
			if d {
				k++
			}
		}
		return k
	}
	for ctx.Err() == nil {
		// An unset resourceVersion starts with every current object.
		w, err := wc.Watch(ctx, list, client.InNamespace(ns))
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			obj, ok := ev.Object.(client.Object)
			if !ok {
				continue // a watch error; the watch is restarted
			}
			state[obj.GetName()] = ev.Type != watch.Deleted && done(obj)
			if count() >= n {
				w.Stop()
				return nil
			}
		}
		w.Stop()
	}
	return fmt.Errorf("%d of %d done: %w", count(), n, ctx.Err())
}

// rollout changes the template's image and waits until every environment
// runs it and is Ready again.
func rollout(ctx context.Context, c client.Client, ns string, n int) (time.Duration, error) {
	start := time.Now()
	if err := setBenchImage(ctx, c, ns, "example.org/app:2"); err != nil {
		return 0, err
	}
	err := waitAll(ctx, c, &appsv1.DeploymentList{}, ns, n, func(obj client.Object) bool {
		d := obj.(*appsv1.Deployment)
		return d.Spec.Template.Spec.Containers[0].Image == "example.org/app:2" &&
			d.Status.UpdatedReplicas == 1 && d.Status.AvailableReplicas == 1 && d.Status.Replicas == 1
	})
	if err != nil {
		return 0, err
	}
	err = waitUserlands(ctx, c, ns, n, func(ul *v1alpha1.Userland) bool {
		return ul.Status.Phase == v1alpha1.PhaseReady && !ul.Status.UpdatePending
	})
	return time.Since(start), err
}

// setBenchImage changes the bench template's image in ns, which every
// environment of it rolls out.
func setBenchImage(ctx context.Context, c client.Client, ns, image string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var t v1alpha1.Template
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, &t); err != nil {
			return err
		}
		t.Spec.PodTemplate.Spec.Containers[0].Image = image
		return c.Update(ctx, &t)
	})
}
