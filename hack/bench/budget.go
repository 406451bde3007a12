package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/testenv"
)

// budgetResult is n environments running under a weekly budget: the
// writes while they run, and at the week's rollover.
type budgetResult struct {
	N int
	// Provisioned is create → all Ready with usage recorded.
	Provisioned time.Duration
	// SteadyWindow and SteadyWrites: the controller's writes while all
	// run, after they settled.
	SteadyWindow time.Duration
	SteadyWrites int
	// Rollover is the controller's writes from the rollover to
	// RolloverWindow after it, by "verb resource"; RolloverSpan from the
	// rollover to the last of them; RolledOver how many environments then
	// counted the new week.
	RolloverWindow time.Duration
	Rollover       map[string]int
	RolloverSpan   time.Duration
	RolledOver     int
	// Lead is how long before its Monday 00:00 UTC the controller's clock
	// started.
	Lead time.Duration
}

// shiftedClock is the real clock moved by offset: it runs at the real
// rate, so the controller's timers (RequeueAfter at a deadline) wait real
// time, but its Monday comes minutes after the benchmark starts.
type shiftedClock struct{ offset time.Duration }

func (c shiftedClock) Now() time.Time                  { return time.Now().Add(c.offset) }
func (c shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// benchBudget runs n Userlands of a template with a weekly budget on a
// cluster of its own, under a controller (in this process, as the chart
// runs it otherwise: its own identity, shipped client limits) whose clock
// reaches Monday 00:00 UTC lead after it starts.
func benchBudget(ctx context.Context, n int, lead, steady time.Duration, dir string) (*budgetResult, error) {
	logf("budgets: starting the simulated cluster (4 kwok nodes) with an audit log")
	env, auditLog, err := startCluster(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = env.Stop() }()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	for _, f := range []string{"role.yaml", "roles.yaml"} {
		if err := env.CreateFromFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", f)); err != nil {
			return nil, err
		}
	}
	cfg, err := env.CertConfigBoundTo(ctx, controllerUser, "userland-controller")
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400 // the shipped --kube-api-qps and --kube-api-burst
	now := time.Now()
	monday := budget.WeekStart(now).AddDate(0, 0, 7)
	clk := shiftedClock{offset: monday.Add(-lead).Sub(now)}
	rollover := now.Add(lead) // the controller's Monday, in real time
	mgr, err := controller.NewManager(cfg, controller.Options{
		MetricsAddr: "0", ProbeAddr: "0", Workers: 16, Registry: prometheus.NewRegistry(),
		GatewayURL: "http://" + gatewayHost, GatewaySelector: "app=gw", GatewayNamespace: "userland-system",
		FirstStatusWindow: controller.DefaultFirstStatusWindow, Clock: clk,
	})
	if err != nil {
		return nil, err
	}
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		if err := mgr.Start(mctx); err != nil {
			logf("budgets: the controller stopped: %v", err)
		}
	}()

	const ns = "budget"
	if err := namespace(ctx, c, ns); err != nil {
		return nil, err
	}
	tmpl := benchTemplate(ns)
	tmpl.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 40, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	if err := c.Create(ctx, tmpl); err != nil {
		return nil, err
	}
	res := &budgetResult{N: n, Lead: lead, SteadyWindow: steady, RolloverWindow: time.Minute}
	logf("budgets: %d environments under a weekly budget; the controller's Monday comes at %s", n, rollover.Format("15:04:05"))
	start := time.Now()
	if err := createAll(ctx, n, func(i int) []client.Object { return []client.Object{benchUserland(ns, i)} }, c); err != nil {
		return nil, err
	}
	running := func(ul *v1alpha1.Userland) bool {
		return ul.Status.Phase == v1alpha1.PhaseReady && ul.Status.Usage != nil && ul.Status.Usage.RunningSince != nil
	}
	if err := waitUserlands(ctx, c, ns, n, running); err != nil {
		return nil, err
	}
	res.Provisioned = time.Since(start)
	logf("budgets: all %d Ready with usage recorded in %s", n, res.Provisioned.Round(time.Millisecond))

	// Settled: the template's batched counts follow the last Ready.
	quiet := time.Now().Add(20 * time.Second)
	if end := quiet.Add(steady); end.Add(5 * time.Second).After(rollover) {
		return nil, fmt.Errorf("the steady window would end at %s, too close to the rollover at %s: raise -budget-lead", end.Format("15:04:05"), rollover.Format("15:04:05"))
	}
	time.Sleep(time.Until(quiet.Add(steady)))
	steadyCounts, err := apiCounts(auditLog, controllerUser, quiet, quiet.Add(steady))
	if err != nil {
		return nil, err
	}
	res.SteadyWrites = writes(steadyCounts)
	logf("budgets: %d controller writes while all ran, over %s", res.SteadyWrites, steady)

	logf("budgets: waiting for the rollover at %s and %s after it", rollover.Format("15:04:05"), res.RolloverWindow)
	time.Sleep(time.Until(rollover.Add(res.RolloverWindow)))
	records, err := readAudit(auditLog, rollover.Add(-time.Second))
	if err != nil {
		return nil, err
	}
	res.Rollover = map[string]int{}
	var last time.Time
	for _, r := range records {
		if r.User != controllerUser || !r.Write() || r.Done.After(rollover.Add(res.RolloverWindow)) {
			continue
		}
		key := r.Verb + " " + r.Resource
		if r.Subresource != "" {
			key += "/" + r.Subresource
		}
		res.Rollover[key]++
		last = maxTime(last, r.Done)
	}
	if !last.IsZero() {
		res.RolloverSpan = last.Sub(rollover)
	}
	var list v1alpha1.UserlandList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, ul := range list.Items {
		if u := ul.Status.Usage; u != nil && u.PeriodStart.Time.Equal(monday) {
			res.RolledOver++
		}
	}
	logf("budgets: the rollover took %d controller writes (%s), the last %s after it; %d of %d count the new week",
		writes(res.Rollover), describeCounts(res.Rollover), res.RolloverSpan.Round(time.Millisecond), res.RolledOver, n)
	return res, nil
}

// describeCounts is "verb resource: n" for each key, sorted.
func describeCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s: %d", k, m[k])
	}
	return s
}
