package main

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// deploymentEvents streams every Deployment's state as it changes, until
// ctx ends. It is an informer, not one watch: the API server ends watches
// when it likes (one ended 46 minutes into a rollout to 10,000), and the
// informer's reflector resumes from the last resourceVersion, or lists
// again when that is too old, by itself. After a re-list each Deployment
// comes again as Modified with its state then, which is all the rollout
// count needs. Events are delivered in order and none is dropped: the
// informer buffers them for a slow reader.
func deploymentEvents(ctx context.Context, c client.WithWatch) <-chan watch.Event {
	events := make(chan watch.Event, 1024)
	send := func(t watch.EventType, obj any) {
		d, ok := obj.(*appsv1.Deployment)
		if !ok {
			if gone, isTomb := obj.(toolscache.DeletedFinalStateUnknown); isTomb {
				d, ok = gone.Obj.(*appsv1.Deployment)
			}
		}
		if !ok {
			return
		}
		select {
		case events <- watch.Event{Type: t, Object: d}:
		case <-ctx.Done():
		}
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list := &appsv1.DeploymentList{}
			return list, c.List(ctx, list, &client.ListOptions{Raw: &o})
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, &appsv1.DeploymentList{}, &client.ListOptions{Raw: &o})
		},
	}
	informer := toolscache.NewSharedIndexInformerWithOptions(lw, &appsv1.Deployment{}, toolscache.SharedIndexInformerOptions{})
	// A watch or list that keeps failing (RBAC, an API server gone) is
	// retried by the reflector forever: say so, rather than wait in
	// silence. Both calls fail only once the informer has started.
	_ = informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		logf("large: the Deployment watch failed, resuming: %v", err)
	})
	_, _ = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { send(watch.Added, obj) },
		UpdateFunc: func(_, obj any) { send(watch.Modified, obj) },
		DeleteFunc: func(obj any) { send(watch.Deleted, obj) },
	})
	go informer.RunWithContext(ctx)
	return events
}
