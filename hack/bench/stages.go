package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// Stage names, in the order an environment passes them.
const (
	stageCreated     = "created"
	stageFirstChild  = "first child"  // the controller's first reconcile made something
	stageDeployment  = "Deployment"   // its Deployment exists
	stagePodReady    = "pod Ready"    // the cluster's own work is done
	stageStatusReady = "status Ready" // the controller said so
	stageAvailable   = "Available"    // baseline: the Deployment is Available
)

// stages records, per environment, when the benchmark first saw it reach
// each stage: the create as the client sent it, then events from watches
// on the namespace (the watcher's clock, so one clock for every stage;
// object timestamps have only seconds).
type stages struct {
	mu sync.Mutex
	at map[string]map[string]time.Time // environment -> stage -> first seen
}

func newStages() *stages { return &stages{at: map[string]map[string]time.Time{}} }

func (s *stages) mark(env, stage string, at time.Time) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.at[env]
	if m == nil {
		m = map[string]time.Time{}
		s.at[env] = m
	}
	if _, ok := m[stage]; !ok {
		m[stage] = at
	}
}

// follow starts watching ns (see watch) and returns the function that
// stops it and waits for the watches to end. A nil s records nothing.
func (s *stages) follow(ctx context.Context, c client.Client, ns string, userlands bool) (stop func()) {
	wc, ok := c.(client.WithWatch)
	if s == nil || !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.watch(ctx, wc, ns, userlands)
	}()
	return func() {
		// The last events (the last Userland's status) are in by now:
		// the caller waited for them through its own watch.
		time.Sleep(500 * time.Millisecond)
		cancel()
		<-done
	}
}

// watch follows Deployments, Services, pods and (for Userlands) Userlands
// in ns until ctx ends, marking stages.
func (s *stages) watch(ctx context.Context, c client.WithWatch, ns string, userlands bool) {
	follow := func(list client.ObjectList, on func(client.Object, time.Time)) {
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, list, client.InNamespace(ns))
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if obj, ok := ev.Object.(client.Object); ok && ev.Type != watch.Deleted {
					on(obj, time.Now())
				}
			}
			w.Stop()
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		follow(&appsv1.DeploymentList{}, func(obj client.Object, at time.Time) {
			s.mark(obj.GetName(), stageFirstChild, at)
			s.mark(obj.GetName(), stageDeployment, at)
			if obj.(*appsv1.Deployment).Status.AvailableReplicas >= 1 {
				s.mark(obj.GetName(), stageAvailable, at)
			}
		})
	})
	wg.Go(func() {
		follow(&corev1.ServiceList{}, func(obj client.Object, at time.Time) { s.mark(obj.GetName(), stageFirstChild, at) })
	})
	wg.Go(func() {
		follow(&corev1.PodList{}, func(obj client.Object, at time.Time) {
			pod := obj.(*corev1.Pod)
			owner := pod.Labels[v1alpha1.LabelUserland]
			for _, c := range pod.Status.Conditions {
				if owner != "" && c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					s.mark(owner, stagePodReady, at)
				}
			}
		})
	})
	if userlands {
		wg.Go(func() {
			follow(&v1alpha1.UserlandList{}, func(obj client.Object, at time.Time) {
				if obj.(*v1alpha1.Userland).Status.Phase == v1alpha1.PhaseReady {
					s.mark(obj.GetName(), stageStatusReady, at)
				}
			})
		})
	}
	wg.Wait()
}

// stageSpan is one interval between two stages, summarised over the
// environments that reached both.
type stageSpan struct {
	From, To      string
	N             int
	P50, P90, P99 time.Duration
}

func (sp stageSpan) String() string {
	return fmt.Sprintf("%s → %s: p50 %s, p90 %s, p99 %s (n=%d)", sp.From, sp.To,
		sp.P50.Round(time.Millisecond), sp.P90.Round(time.Millisecond), sp.P99.Round(time.Millisecond), sp.N)
}

// span summarises from → to.
func (s *stages) span(from, to string) stageSpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d []time.Duration
	for _, m := range s.at {
		a, okA := m[from]
		b, okB := m[to]
		if okA && okB {
			d = append(d, max(b.Sub(a), 0))
		}
	}
	slices.Sort(d)
	return stageSpan{From: from, To: to, N: len(d), P50: percentile(d, 0.50), P90: percentile(d, 0.90), P99: percentile(d, 0.99)}
}

// userlandSpans are the intervals reported for Userlands, in order.
func (s *stages) userlandSpans() []stageSpan {
	return []stageSpan{
		s.span(stageCreated, stageFirstChild),
		s.span(stageCreated, stageDeployment),
		s.span(stageDeployment, stagePodReady),
		s.span(stagePodReady, stageStatusReady),
		s.span(stageCreated, stageStatusReady),
	}
}

// baselineSpans are the baseline's: its create to Available.
func (s *stages) baselineSpans() []stageSpan {
	return []stageSpan{
		s.span(stageCreated, stagePodReady),
		s.span(stageCreated, stageAvailable),
	}
}
