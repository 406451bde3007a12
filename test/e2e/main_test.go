// Package e2e drives the dashboard in a real headless Chromium over the
// `userland dev` stack: the simulated cluster, the controller with its
// webhooks, and the gateway with static users, all as `make dev` runs them.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/devenv"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testenv"
)

var (
	stack *devenv.Stack
	// browser is the allocator every test opens its own browser context
	// (separate cookies) in.
	browser context.Context
	// artifacts receives screenshots (USERLAND_ARTIFACTS, default
	// test/e2e/artifacts).
	artifacts string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The stack's logs at error level, as in every other suite (unset, each
	// controller prints a warning with a stack trace instead).
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	chromium, err := testenv.ChromiumPath()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	artifacts = os.Getenv("USERLAND_ARTIFACTS")
	if artifacts == "" {
		artifacts = filepath.Join(testenv.RepoRoot(), "test", "e2e", "artifacts")
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	state, err := os.MkdirTemp("", "userland-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(state) }()
	listen, err := simcluster.FreeAddr()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	stack, err = devenv.Start(ctx, devenv.Options{StateDir: state, Listen: listen, Log: os.Stderr,
		// As cmd/userland runs it.
		NewController: func(cfg *rest.Config, s devenv.ControllerSettings) (devenv.Runnable, error) {
			return controller.NewManager(cfg, controller.Options{
				MetricsAddr: "0", ProbeAddr: "0", Workers: 4, Registry: prometheus.NewRegistry(),
				GatewayURL: s.GatewayURL, GatewaySelector: s.GatewaySelector, GatewayNamespace: s.GatewayNamespace,
				BaseDomain: s.BaseDomain, Webhooks: s.Webhooks,
				FirstStatusWindow: controller.DefaultFirstStatusWindow,
			})
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the dev stack:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: dev stack up at %s in %s\n", stack.URL, time.Since(start).Round(100*time.Millisecond))
	defer func() {
		if err := stack.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping:", err)
		}
	}()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // root in CI
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(filepath.Join(state, "chromium")),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer allocCancel()
	// The first context starts the browser; tests then open their own
	// browser contexts in it.
	var browserCancel context.CancelFunc
	browser, browserCancel = chromedp.NewContext(allocCtx)
	defer browserCancel()
	if err := chromedp.Do(browser); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting Chromium:", err)
		return 1
	}
	return m.Run()
}
