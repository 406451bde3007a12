package controller

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/metricsauth"
	"github.com/userland-dev/userland/internal/webhook"
)

// LeaderElectionID is the name of the controller's leader-election Lease,
// in its own namespace. The chart's Role grants get and update on this
// name only (and create, which RBAC cannot limit to a name), so there is
// no RBAC marker for leases: a ClusterRole would let the controller take
// over any lease of the cluster, other controllers' and nodes' alike.
const LeaderElectionID = "userland-controller.userland.dev"

// Options configure the controller manager; `userland controller` fills
// them from flags.
type Options struct {
	// MetricsAddr serves Prometheus metrics ("0" disables).
	MetricsAddr string
	// MetricsSecure serves them over HTTPS to callers the API server
	// authenticates (TokenReview) and RBAC allows get on /metrics
	// (SubjectAccessReview, internal/metricsauth); false serves plain HTTP to
	// anyone.
	MetricsSecure bool
	// ProbeAddr serves /healthz and /readyz.
	ProbeAddr string
	// PprofAddr serves net/http/pprof when set (profiling benchmarks).
	PprofAddr string
	// LeaderElection makes only one replica reconcile at a time.
	LeaderElection bool
	// LeaderElectionNamespace holds the lease (default: in-cluster namespace).
	LeaderElectionNamespace string
	// LeaseDuration is how long a stand-by waits after the leader's last
	// renewal before taking over; RenewDeadline how long the leader keeps
	// trying to renew before it stops leading; RetryPeriod how often each
	// tries. Zero: controller-runtime's 15s, 10s and 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Workers is how many Userlands are reconciled in parallel.
	Workers int
	// GatewayURL is the gateway's external URL, for status.url.
	GatewayURL string
	// BaseDomain is the environment domain (subdomain routing); empty: the
	// gateway URL's host, as before environment domains existed.
	BaseDomain string
	// GatewaySelector selects gateway pods in NetworkPolicies.
	GatewaySelector string
	// GatewayNamespace is the gateway's namespace: NetworkPolicies admit
	// GatewaySelector's pods of this namespace only.
	GatewayNamespace string
	// ClusterDNS says where environments with Internet egress may send
	// DNS queries; zero: kube-system's k8s-app=kube-dns pods.
	ClusterDNS ClusterDNSOptions
	// RolloutIdleAfter is how long without activity makes a WhenIdle
	// rollout due.
	RolloutIdleAfter time.Duration
	// FirstStatusWindow is how long a new environment's first Starting
	// status waits, so one that is Ready within it is written once; zero
	// writes Starting at once. The command's default is
	// DefaultFirstStatusWindow.
	FirstStatusWindow time.Duration
	// Room configures courses' placeholders and image pullers; empty
	// fields take the defaults (DefaultPlaceholderPriorityClass, ...).
	Room RoomOptions
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
	// Registry receives the controller's metrics; default controller-runtime's
	// registry, which the metrics endpoint serves. Tests that start several
	// managers in one process pass their own.
	Registry prometheus.Registerer
	// Webhooks configures the admission webhooks; nil serves none.
	Webhooks *webhook.Options
	// AllowRestart lets one process create several managers in turn (tests
	// that restart the controller); controller-runtime otherwise refuses
	// reused controller names.
	AllowRestart bool
	// BudgetMetricsUserLabel adds the user label to the budget metrics:
	// one series per person, so off by default.
	BudgetMetricsUserLabel bool
}

// NewManager builds a manager running the Userland and template-status
// reconcilers against cfg.
func NewManager(cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	gatewayURL, err := url.Parse(opts.GatewayURL)
	if err != nil || (opts.GatewayURL != "" && (gatewayURL.Scheme == "" || gatewayURL.Host == "")) {
		return nil, fmt.Errorf("--gateway-url %q must be an absolute URL such as https://userland.example.edu", opts.GatewayURL)
	}
	if opts.GatewayURL == "" {
		gatewayURL = nil
	}
	if opts.GatewayNamespace == "" {
		return nil, errors.New("--gateway-namespace is required: environment NetworkPolicies admit the gateway's pods of that namespace only")
	}
	selector, err := metav1.ParseToLabelSelector(opts.GatewaySelector)
	if err != nil {
		return nil, fmt.Errorf("--gateway-pod-selector %q: %w", opts.GatewaySelector, err)
	}
	dns, err := opts.ClusterDNS.Parse()
	if err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Registry == nil {
		opts.Registry = crmetrics.Registry
	}
	if opts.Workers < 1 {
		opts.Workers = 1
	}
	scheme := v1alpha1.NewScheme()
	// Volume snapshots are read and made only when a course retires with
	// a snapshot class, straight from the API server: clusters without
	// the CSI snapshot CRDs are fine until then.
	if err := snapshotv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering volume snapshots: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		WebhookServer: webhook.NewServer(opts.Webhooks),
		Scheme:        scheme,
		Cache:         CacheOptions(),
		// Secrets are never read through the manager's cache: an
		// informer would list every Secret of the cluster, which the
		// controller's RBAC does not grant (it holds only its webhook
		// certificate, by name, which cert-controller reads with its
		// own name-scoped cache).
		Client:                  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics:                 MetricsServerOptions(opts.MetricsAddr, opts.MetricsSecure),
		HealthProbeBindAddress:  opts.ProbeAddr,
		PprofBindAddress:        opts.PprofAddr,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// Release the lease on shutdown so a rolling update hands over fast.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 nonZero(opts.LeaseDuration),
		RenewDeadline:                 nonZero(opts.RenewDeadline),
		RetryPeriod:                   nonZero(opts.RetryPeriod),
		Controller:                    config.Controller{SkipNameValidation: ptr.To(opts.AllowRestart)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding ready check: %w", err)
	}
	if err := SetupIndexes(context.Background(), mgr); err != nil {
		return nil, fmt.Errorf("adding indexes: %w", err)
	}
	r := &UserlandReconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		Recorder:          mgr.GetEventRecorder("userland-controller"),
		Clock:             opts.Clock,
		Routes:            Routes{GatewayURL: gatewayURL, Domain: opts.BaseDomain},
		GatewaySelector:   selector,
		GatewayNamespace:  opts.GatewayNamespace,
		ClusterDNS:        dns,
		RolloutIdleAfter:  opts.RolloutIdleAfter,
		FirstStatusWindow: opts.FirstStatusWindow,
		Metrics:           NewMetrics(opts.Registry, mgr.GetCache()),
	}
	opts.Registry.MustRegister(newBudgetCollector(mgr.GetCache(), opts.Clock, opts.BudgetMetricsUserLabel))
	if err := r.SetupWithManager(mgr, opts.Workers); err != nil {
		return nil, fmt.Errorf("setting up userland controller: %w", err)
	}
	if err := (&SharedPolicyReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up shared network policy controller: %w", err)
	}
	for _, kind := range []v1alpha1.TemplateKind{v1alpha1.TemplateKindTemplate, v1alpha1.TemplateKindClusterTemplate} {
		if err := (&TemplateStatusReconciler{Client: mgr.GetClient(), Kind: kind, Clock: opts.Clock}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up %s status controller: %w", kind, err)
		}
	}
	courses := &CourseReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("userland-controller"), Clock: opts.Clock,
		Room: opts.Room,
	}
	if err := courses.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up course controller: %w", err)
	}
	if opts.Webhooks != nil {
		if err := webhook.Serve(mgr, opts.Webhooks, FieldOwner); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// DefaultFirstStatusWindow is --first-status-window's default: long enough
// for an environment whose image is on the node to be Ready, short enough
// that nobody waits on an empty status.
const DefaultFirstStatusWindow = time.Second

// nonZero is d, or nil (the library's default) when d is zero.
func nonZero(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}

// Checking a metrics caller's token and RBAC (MetricsServerOptions):
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// MetricsServerOptions serve the controller's metrics at addr. Secure, as
// the chart ships it, they go over HTTPS (a certificate controller-runtime
// makes itself) only to a caller whose bearer token the API server
// accepts and whom RBAC allows get on the non-resource URL /metrics (the
// userland-metrics-reader ClusterRole): its series name users (budget use
// per environment), which a pod that can reach the port must not read.
func MetricsServerOptions(addr string, secure bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr}
	if secure {
		o.SecureServing = true
		o.FilterProvider = metricsauth.Filter
	}
	return o
}
