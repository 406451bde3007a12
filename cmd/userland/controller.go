package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/userland-dev/userland/internal/apilimits"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/gctune"
	"github.com/userland-dev/userland/internal/webhook"
)

func newControllerCommand() *cobra.Command {
	opts := controller.Options{}
	hooks := webhook.Options{}
	var (
		disableWebhooks bool
		certMode        string
		certSecret      string
		webhookService  string
		extraDNSNames   []string
		qps             float32
		burst           int
	)
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
			gctune.Apply(context.Background(), gctune.Controller, ctrl.Log.WithName("gc"))
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			apilimits.Apply(cfg, qps, burst)
			apilimits.RegisterMetrics()
			if !disableWebhooks {
				if err := webhookOptions(&hooks, certMode, certSecret, webhookService, extraDNSNames); err != nil {
					return err
				}
				opts.Webhooks = &hooks
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
	f.BoolVar(&opts.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS only to callers with a bearer token the API server accepts and RBAC allows get on /metrics (ClusterRole userland-metrics-reader); false serves plain HTTP to anyone who reaches the port")
	f.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	f.BoolVar(&opts.LeaderElection, "leader-elect", true, "elect a leader so that only one replica reconciles")
	f.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election lease (default: the pod's namespace)")
	f.DurationVar(&opts.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "how long stand-by replicas wait after the leader's last renewal before one takes over (a killed leader's environments wait this long)")
	f.DurationVar(&opts.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader keeps failing to renew before it stops reconciling; less than the lease duration")
	f.DurationVar(&opts.RetryPeriod, "leader-election-retry-period", 2*time.Second, "how often the leader renews and stand-by replicas try to acquire")
	f.IntVar(&opts.Workers, "workers", 16, "Userlands reconciled in parallel (a reconcile mostly waits on the API server)")
	f.StringVar(&opts.GatewayURL, "gateway-url", "", "external URL of the gateway, e.g. https://userland.example.edu; sets status.url")
	f.StringVar(&opts.BaseDomain, "base-domain", "", "environment domain, as the gateway's --base-domain: status.url is then the environment's own host, and templates without http.routing use it")
	f.StringVar(&opts.GatewayNamespace, "gateway-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the gateway's pods; NetworkPolicies admit --gateway-pod-selector's pods of this namespace only (default $POD_NAMESPACE)")
	f.StringVar(&opts.GatewaySelector, "gateway-pod-selector", "app.kubernetes.io/name=userland-gateway", "label selector of the gateway's pods; NetworkPolicies admit only them")
	f.StringVar(&opts.ClusterDNS.Namespace, "cluster-dns-namespace", controller.DefaultClusterDNSNamespace, "namespace of the cluster's DNS pods; environments with Internet egress may query only them (port 53)")
	f.StringVar(&opts.ClusterDNS.PodSelector, "cluster-dns-pod-selector", controller.DefaultClusterDNSPodSelector, "label selector of the cluster's DNS pods")
	f.StringSliceVar(&opts.ClusterDNS.CIDRs, "cluster-dns-cidrs", nil, "further DNS servers environments may query on port 53, e.g. NodeLocal DNSCache's 169.254.20.10/32")
	f.DurationVar(&opts.RolloutIdleAfter, "rollout-idle-after", 10*time.Minute, "how long without activity before a WhenIdle template change is applied to a running environment")
	f.BoolVar(&opts.BudgetMetricsUserLabel, "budget-metrics-user-label", false, "add a user label to userland_usage_seconds_total and userland_budget_remaining_seconds (one series per person: mind the cardinality)")
	f.DurationVar(&opts.FirstStatusWindow, "first-status-window", controller.DefaultFirstStatusWindow, "how long a new environment's first Starting status is held back: one Ready within it gets a single status write instead of two (0: write Starting at once)")
	f.StringVar(&opts.Room.PriorityClass, "placeholder-priority-class", controller.DefaultPlaceholderPriorityClass, "PriorityClass of courses' placeholder pods (the chart ships it: value -10, preemptionPolicy Never)")
	f.StringVar(&opts.Room.PauseImage, "pause-image", controller.DefaultPauseImage, "image of placeholder pods and of the image pullers' main container: sleeps, as non-root")
	f.StringVar(&opts.Room.PullerImage, "puller-image", controller.DefaultPullerImage, "the userland image: image pullers copy its binary into each pod and run it as the command of the images they pull")
	f.BoolVar(&disableWebhooks, "disable-webhooks", false, "do not serve the admission webhooks (for running outside the cluster)")
	f.IntVar(&hooks.Port, "webhook-port", 9443, "port of the admission webhook server")
	f.StringVar(&hooks.CertDir, "webhook-cert-dir", filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"), "directory holding the webhook server's tls.crt and tls.key")
	f.StringVar(&hooks.PodSecurityLevel, "pod-security-level", "baseline", "Pod Security Standards level enforced on templates: privileged, baseline or restricted")
	f.StringVar(&certMode, "webhook-cert-mode", "self", "self: create and rotate the webhook certificate and inject its CA; external: certificates are provided (e.g. by cert-manager) in --webhook-cert-dir")
	f.StringVar(&certSecret, "webhook-cert-secret", "userland-webhook-cert", "Secret (name or namespace/name; default namespace $POD_NAMESPACE) holding the self-managed certificate")
	f.StringVar(&hooks.ConfigName, "webhook-config-name", "userland-validating-webhook-configuration", "ValidatingWebhookConfiguration whose CA bundle is managed in self mode")
	f.StringVar(&webhookService, "webhook-service", "userland-webhook-service", "Service in front of the webhook server; the certificate is issued for <service>.<namespace>.svc")
	f.StringSliceVar(&hooks.GrantRecorders, "webhook-grant-recorders", nil, "user names that may record a compute-hour grant as another person's: the gateway's ServiceAccount (system:serviceaccount:NAMESPACE:NAME), which names the signed-in person it asked RBAC about; anyone else names only themself")
	f.BoolVar(&hooks.WriteCertsToDir, "webhook-write-certs", false, "copy the self-managed certificate from its Secret into --webhook-cert-dir (outside a cluster, where no kubelet mounts it)")
	f.StringSliceVar(&extraDNSNames, "webhook-extra-dns-names", nil, "additional DNS names for the self-managed certificate")
	f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: in-cluster, then $KUBECONFIG)")
	f.Float32Var(&qps, "kube-api-qps", apilimits.ControllerQPS, "requests per second to the API server (client-side limit; negative: none, leaving it to the API server's priority and fairness); converged environments cost none")
	f.IntVar(&burst, "kube-api-burst", apilimits.ControllerBurst, "burst above --kube-api-qps")
	f.StringVar(&opts.PprofAddr, "pprof-bind-address", "", "address of net/http/pprof; empty disables it")
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

// webhookOptions completes the webhook options from the flags.
func webhookOptions(hooks *webhook.Options, certMode, certSecret, service string, extraDNSNames []string) error {
	switch certMode {
	case "self":
		hooks.SelfSignedCerts = true
	case "external":
		return nil
	default:
		return fmt.Errorf("--webhook-cert-mode %q: must be self or external", certMode)
	}
	namespace, name, found := strings.Cut(certSecret, "/")
	if !found {
		namespace, name = os.Getenv("POD_NAMESPACE"), certSecret
	}
	if namespace == "" {
		return fmt.Errorf("--webhook-cert-secret %q: give namespace/name, or set POD_NAMESPACE", certSecret)
	}
	hooks.CertSecret = types.NamespacedName{Namespace: namespace, Name: name}
	hooks.DNSNames = append([]string{service + "." + namespace + ".svc"}, extraDNSNames...)
	return nil
}
