package controller

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/templates"
)

// rolloutPump wakes a template's environments waiting for an Immediate
// rollout's place: as many as there are places free, not all of them.
//
// Each freed place used to wake every waiting environment of the template,
// and each of those decided (counting its thousands of siblings from the
// cache) only for one to get the place: a rollout to 10,000 in one
// namespace spent about 2,100 s of controller CPU and an hour, most of it
// in decisions that said "no room". Now a freed place pokes the pump with
// the template; the pump counts the template once, as a decision does, and
// wakes as many waiting environments as there are places free, taking
// turns in name order. Whether one may restart is still decided by its own
// reconcile (budgetAvailable, under the decision lock), so the budget is
// kept exactly as before; the pump decides only who asks.
//
// A woken environment may not take its place (the cache still shows it
// waiting after its restart, say): while places stay free and environments
// wait, the pump looks again every pumpRecheck, so a place is never left
// unclaimed for want of an event.
type rolloutPump struct {
	r *UserlandReconciler
	// wake enqueues a Userland in the Userland controller.
	wake  chan<- event.GenericEvent
	queue workqueue.TypedDelayingInterface[string]

	mu sync.Mutex
	// next is, per template, the name the next turn starts at.
	next map[string]types.NamespacedName
}

// pumpRecheck is how soon the pump looks again at a template that still
// had places free and environments waiting after it woke some.
const pumpRecheck = time.Second

func newRolloutPump(r *UserlandReconciler, wake chan<- event.GenericEvent) *rolloutPump {
	return &rolloutPump{
		r: r, wake: wake,
		queue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: "rollout-pump"}),
		next:  map[string]types.NamespacedName{},
	}
}

// poke asks the pump to look at the template key (deduplicated while it
// waits). A nil pump (a reconciler made without SetupWithManager) does
// nothing.
func (p *rolloutPump) poke(key string) {
	if p != nil && key != "" {
		p.queue.Add(key)
	}
}

// NeedLeaderElection: only the leader's reconciles decide.
func (p *rolloutPump) NeedLeaderElection() bool { return true }

// Start runs the pump until ctx ends.
func (p *rolloutPump) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	log := ctrl.LoggerFrom(ctx).WithName("rollout-pump")
	for {
		key, shutdown := p.queue.Get()
		if shutdown {
			return nil
		}
		again, err := p.pump(ctx, key)
		if err != nil {
			log.Error(err, "waking environments waiting for a rollout's place; looking again", "template", key)
		}
		if again || err != nil {
			p.queue.AddAfter(key, pumpRecheck)
		}
		p.queue.Done(key)
	}
}

// pump wakes as many of the template's waiting environments as there are
// places free, and says whether to look again.
func (p *rolloutPump) pump(ctx context.Context, key string) (again bool, err error) {
	r := p.r
	var list v1alpha1.UserlandList
	// Read-only: the cache's objects are not copied.
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexPendingTemplateKey: key}, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	if len(list.Items) == 0 {
		return false, nil
	}
	t, err := templates.Resolve(ctx, r.Client, &list.Items[0])
	if err != nil || t.Spec.Rollout.Policy != v1alpha1.RolloutImmediate {
		// Gone, or not a policy that waits for places (WhenIdle and Manual
		// look again by time or by hand): the template's own event
		// reconciles every environment of it anyway.
		return false, client.IgnoreNotFound(err)
	}
	b, err := r.countBudget(ctx, key, types.NamespacedName{}, r.Clock.Now())
	if err != nil {
		return false, err
	}
	maxUnavailable, err := maxUnavailableOf(t.Spec, b.running)
	if err != nil {
		return false, err
	}
	free := maxUnavailable - b.unavailable
	if free <= 0 {
		// Full: the Deployment event, deletion or put-back that frees a
		// place pokes the pump again; a restart that expires is rechecked
		// by the reconciles that found no room.
		return false, nil
	}
	waiting := make([]types.NamespacedName, 0, len(list.Items))
	for i := range list.Items {
		waiting = append(waiting, client.ObjectKeyFromObject(&list.Items[i]))
	}
	for _, name := range p.turn(key, waiting, free) {
		ul := &v1alpha1.Userland{}
		ul.Namespace, ul.Name = name.Namespace, name.Name
		select {
		case p.wake <- event.GenericEvent{Object: ul}:
		case <-ctx.Done():
			return false, nil
		}
	}
	ctrl.LoggerFrom(ctx).V(1).Info("woke environments waiting for a rollout's place", "template", key,
		"free", free, "waiting", len(waiting))
	return true, nil
}

// turn picks n of waiting (all, when fewer), in name order from where the
// template's last turn ended, so every waiting environment is woken in
// turn and none is passed over for good.
func (p *rolloutPump) turn(key string, waiting []types.NamespacedName, n int) []types.NamespacedName {
	slices.SortFunc(waiting, compareNames)
	if n >= len(waiting) {
		p.setNext(key, types.NamespacedName{})
		return waiting
	}
	p.mu.Lock()
	from := p.next[key]
	p.mu.Unlock()
	start, _ := slices.BinarySearchFunc(waiting, from, compareNames)
	picked := make([]types.NamespacedName, 0, n)
	for i := range n {
		picked = append(picked, waiting[(start+i)%len(waiting)])
	}
	after := waiting[(start+n)%len(waiting)]
	p.setNext(key, after)
	return picked
}

func (p *rolloutPump) setNext(key string, name types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if name == (types.NamespacedName{}) {
		delete(p.next, key)
		return
	}
	p.next[key] = name
}

func compareNames(a, b types.NamespacedName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}
