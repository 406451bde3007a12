package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/userland-dev/userland/internal/devcontroller"
	"github.com/userland-dev/userland/internal/devenv"
	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/simcluster"
)

func newDevCommand() *cobra.Command {
	opts := devenv.Options{NewController: devcontroller.New}
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
environments' Services by their cluster DNS names.

With --real-node (Linux, root; make dev-real-node) the pods run on one
real node beside the simulated control plane: containerd, kubelet,
kube-proxy, kube-router's NetworkPolicy firewall and CoreDNS, contained in
a network namespace of their own. The gateway reaches the environments
from inside that namespace by their Services' cluster DNS names. Nothing
of the node is kept between runs.`,
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
	var real devenv.RealNodeOptions
	var realNode bool
	var nodeImages string
	f.BoolVar(&realNode, "real-node", false, "run the pods on one real node (kubelet, containerd, kube-proxy, kube-router's NetworkPolicy firewall, CoreDNS) beside the simulated control plane, instead of kwok's: Linux and root only; make dev-real-node builds its parts")
	f.StringVar(&real.NodeBinariesDir, "node-dir", os.Getenv("USERLAND_NODE_DIR"), "with --real-node: the node's binaries (hack/build-node.sh prints the directory)")
	f.StringVar(&nodeImages, "node-images", os.Getenv("USERLAND_REALNODE_IMAGES"), "with --real-node: a directory of OCI archives (*.tar) imported into the node's containerd; the sandbox image userland.local/pause:1 must be among them (hack/nodeimage pack DIR)")
	var appImages string
	f.StringVar(&appImages, "app-images", os.Getenv("USERLAND_APP_IMAGES"), "with --real-node: the manifest hack/build-app-images.sh prints; its archives are imported and the sample templates run its local builds in place of their public images (the samples are not changed)")
	f.StringToStringVar(&real.ImageOverrides, "image-override", nil, "with --real-node: run a local image in place of a sample template's public one, public=local (repeatable); the samples are not changed")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if !realNode {
			if f.Changed("node-dir") || f.Changed("node-images") || f.Changed("image-override") || f.Changed("app-images") {
				return errors.New("--node-dir, --node-images, --app-images and --image-override need --real-node")
			}
			return nil
		}
		if opts.Kubeconfig != "" {
			return errors.New("--real-node starts a cluster of its own; it cannot be combined with --kubeconfig")
		}
		if real.NodeBinariesDir == "" {
			return errors.New("--real-node needs --node-dir (or $USERLAND_NODE_DIR): the directory hack/build-node.sh prints")
		}
		if nodeImages == "" {
			return errors.New("--real-node needs --node-images (or $USERLAND_REALNODE_IMAGES): a directory with the sandbox image's archive, made by hack/nodeimage pack DIR")
		}
		archives, err := filepath.Glob(filepath.Join(nodeImages, "*.tar"))
		if err != nil || len(archives) == 0 {
			return fmt.Errorf("--node-images %s holds no *.tar archives", nodeImages)
		}
		real.Images = archives
		if appImages != "" {
			apps, overrides, err := realnode.ReadAppImages(appImages)
			if err != nil {
				return fmt.Errorf("--app-images: %w", err)
			}
			real.Images = append(real.Images, apps...)
			for public, local := range real.ImageOverrides {
				overrides[public] = local // --image-override wins
			}
			real.ImageOverrides = overrides
		}
		opts.RealNode = &real
		return nil
	}
	return cmd
}
