package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/userland-dev/userland/internal/controller"
)

func newControllerCommand() *cobra.Command {
	opts := controller.Options{}
	zapOpts := zap.Options{}
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the Userland controller (reconcilers, metrics, health probes)",
		Long: `Run the controller-runtime manager that reconciles every Userland into a
Deployment, Service, PersistentVolumeClaims and NetworkPolicy and reports
its status, and keeps Template and ClusterTemplate status counts.

It uses the in-cluster configuration, or --kubeconfig / $KUBECONFIG.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			mgr, err := controller.NewManager(cfg, opts)
			if err != nil {
				return err
			}
			return mgr.Start(ctrl.SetupSignalHandler())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	f.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	f.BoolVar(&opts.LeaderElection, "leader-elect", true, "elect a leader so that only one replica reconciles")
	f.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election lease (default: the pod's namespace)")
	f.IntVar(&opts.Workers, "workers", 4, "Userlands reconciled in parallel")
	f.StringVar(&opts.GatewayURL, "gateway-url", "", "external URL of the gateway, e.g. https://userland.example.edu; sets status.url")
	f.StringVar(&opts.GatewaySelector, "gateway-pod-selector", "app.kubernetes.io/name=userland-gateway", "label selector of the gateway's pods; NetworkPolicies admit only them")
	f.DurationVar(&opts.RolloutIdleAfter, "rollout-idle-after", 10*time.Minute, "how long without activity before a WhenIdle template change is applied to a running environment")
	f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: in-cluster, then $KUBECONFIG)")
	goFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	zapOpts.BindFlags(goFlags)
	f.AddGoFlagSet(goFlags)
	return cmd
}

// restConfig loads the kubeconfig at path, or the in-cluster configuration
// and then $KUBECONFIG when path is empty.
func restConfig(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
		}
		return cfg, nil
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}
