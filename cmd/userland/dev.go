package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/devenv"
	"github.com/userland-dev/userland/internal/simcluster"
)

func newDevCommand() *cobra.Command {
	opts := devenv.Options{NewController: newDevController}
	var verbose bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole system on this machine: simulated cluster, controller, gateway and dashboard",
		Long: `Run Userland on this machine with no cluster and no container runtime:
a simulated cluster (kube-apiserver, etcd, kube-controller-manager,
kube-scheduler and kwok nodes), the CRDs, webhooks, RBAC, sample templates
and demo users, the controller and the gateway with static-user sign-in.
State is kept in --state-dir between runs; --reset wipes it.

With --kubeconfig it runs the controller and gateway against an existing
cluster instead, with real pods; this machine must then reach the
environments' Services by their cluster DNS names.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if verbose {
				ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
			} else {
				// The banner is the interface; component logs go to a file
				// (startup races such as the first certificate write are
				// logged as errors and retried).
				if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
					return err
				}
				logFile, err := os.OpenFile(filepath.Join(opts.StateDir, "userland.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
				if err != nil {
					return fmt.Errorf("opening the log file: %w", err)
				}
				defer func() { _ = logFile.Close() }()
				ctrl.SetLogger(zap.New(zap.WriteTo(logFile), zap.Level(zapcore.InfoLevel)))
				fmt.Fprintf(cmd.ErrOrStderr(), "logs: %s\n", logFile.Name())
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts.Log = cmd.ErrOrStderr()
			start := time.Now()
			stack, err := devenv.Start(ctx, opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n(up in %s)\n", stack.Banner(), time.Since(start).Round(100*time.Millisecond))
			var runErr error
			select {
			case <-ctx.Done():
				fmt.Fprintln(cmd.ErrOrStderr(), "\nstopping …")
			case <-stack.Exited():
				runErr = stack.Err()
			}
			stop()
			if err := stack.Stop(); err != nil && runErr == nil {
				runErr = err
			}
			if runErr == nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "stopped.")
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.StateDir, "state-dir", ".userland-dev", "where the simulated cluster keeps its data between runs")
	f.BoolVar(&opts.Reset, "reset", false, "wipe --state-dir first")
	f.StringVar(&opts.Listen, "listen", "127.0.0.1:8000", "address of the dashboard and gateway")
	f.StringVar(&opts.Kubeconfig, "kubeconfig", "", "run against this existing cluster instead of a simulated one")
	f.StringVar(&opts.ControlPlaneDir, "control-plane-dir", "", "the simulated cluster's binaries (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok); default $"+simcluster.BinariesEnvVar+", then "+simcluster.DefaultCacheDir()+", then built by `make control-plane` when run in a Userland checkout")
	f.BoolVarP(&verbose, "verbose", "v", false, "print the controller's and gateway's logs")
	return cmd
}

// newDevController is the controller `userland dev` runs in-process.
func newDevController(cfg *rest.Config, s devenv.ControllerSettings) (devenv.Runnable, error) {
	return controller.NewManager(cfg, controller.Options{
		MetricsAddr: "0", ProbeAddr: "0", Workers: 4, Registry: prometheus.NewRegistry(),
		GatewayURL: s.GatewayURL, GatewaySelector: s.GatewaySelector, GatewayNamespace: s.GatewayNamespace,
		BaseDomain: s.BaseDomain, Webhooks: s.Webhooks,
		FirstStatusWindow: controller.DefaultFirstStatusWindow,
	})
}
