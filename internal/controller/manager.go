package controller

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/webhook"
)

// Options configure the controller manager; `userland controller` fills
// them from flags.
type Options struct {
	// MetricsAddr serves Prometheus metrics ("0" disables).
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz.
	ProbeAddr string
	// PprofAddr serves net/http/pprof when set (profiling benchmarks).
	PprofAddr string
	// LeaderElection makes only one replica reconcile at a time.
	LeaderElection bool
	// LeaderElectionNamespace holds the lease (default: in-cluster namespace).
	LeaderElectionNamespace string
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
	// RolloutIdleAfter is how long without activity makes a WhenIdle
	// rollout due.
	RolloutIdleAfter time.Duration
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
	// Registry receives the controller's metrics; default controller-runtime's
	// registry, which the metrics endpoint serves. Tests that start several
	// managers in one process pass their own.
	Registry prometheus.Registerer
	// Webhooks configures the admission webhooks; nil serves none.
	Webhooks *WebhookOptions
	// AllowRestart lets one process create several managers in turn (tests
	// that restart the controller); controller-runtime otherwise refuses
	// reused controller names.
	AllowRestart bool
}

// WebhookOptions configure the admission webhook server.
type WebhookOptions struct {
	// Port of the webhook server (9443).
	Port int
	// Host binds the server; empty means every interface.
	Host string
	// CertDir holds tls.crt and tls.key.
	CertDir string
	// PodSecurityLevel is enforced on templates: privileged, baseline or
	// restricted.
	PodSecurityLevel string
	// SelfSignedCerts makes the controller create and rotate its own
	// certificate in CertSecret and inject the CA into ConfigName. When
	// false, certificates come from elsewhere (cert-manager) into CertDir.
	SelfSignedCerts bool
	// CertSecret is namespace/name of the Secret holding the certificate.
	CertSecret types.NamespacedName
	// ConfigName is the ValidatingWebhookConfiguration to inject the CA into.
	ConfigName string
	// DNSNames the certificate is valid for; the first is the service name.
	DNSNames []string
	// WriteCertsToDir copies the certificate from CertSecret into CertDir.
	// In a cluster the Secret is mounted there by the kubelet; out of a
	// cluster (`userland dev`, tests) nothing else would put it there.
	WriteCertsToDir bool
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
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Registry == nil {
		opts.Registry = crmetrics.Registry
	}
	if opts.Workers < 1 {
		opts.Workers = 1
	}
	var ps *webhook.PodSecurity
	webhookServer := crwebhook.NewServer(crwebhook.Options{})
	if w := opts.Webhooks; w != nil {
		if ps, err = webhook.NewPodSecurity(w.PodSecurityLevel); err != nil {
			return nil, err
		}
		webhookServer = crwebhook.NewServer(crwebhook.Options{Host: w.Host, Port: w.Port, CertDir: w.CertDir})
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		WebhookServer:           webhookServer,
		Scheme:                  v1alpha1.NewScheme(),
		Cache:                   CacheOptions(),
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  opts.ProbeAddr,
		PprofBindAddress:        opts.PprofAddr,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        "userland-controller.userland.dev",
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// Release the lease on shutdown so a rolling update hands over fast.
		LeaderElectionReleaseOnCancel: true,
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
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Recorder:         mgr.GetEventRecorder("userland-controller"),
		Clock:            opts.Clock,
		Routes:           Routes{GatewayURL: gatewayURL, Domain: opts.BaseDomain},
		GatewaySelector:  selector,
		GatewayNamespace: opts.GatewayNamespace,
		RolloutIdleAfter: opts.RolloutIdleAfter,
		Metrics:          NewMetrics(opts.Registry, mgr.GetCache()),
	}
	if err := r.SetupWithManager(mgr, opts.Workers); err != nil {
		return nil, fmt.Errorf("setting up userland controller: %w", err)
	}
	for _, kind := range []v1alpha1.TemplateKind{v1alpha1.TemplateKindTemplate, v1alpha1.TemplateKindClusterTemplate} {
		if err := (&TemplateStatusReconciler{Client: mgr.GetClient(), Kind: kind, Clock: opts.Clock}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up %s status controller: %w", kind, err)
		}
	}
	if opts.Webhooks != nil {
		if err := setupWebhooks(mgr, opts.Webhooks, ps); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch;update

// setupWebhooks registers the webhooks; with self-signed certificates it
// first lets cert-controller create them, since the webhook server cannot
// start without its key pair.
func setupWebhooks(mgr ctrl.Manager, w *WebhookOptions, ps *webhook.PodSecurity) error {
	if !w.SelfSignedCerts {
		return webhook.Setup(mgr, ps)
	}
	if len(w.DNSNames) == 0 {
		return fmt.Errorf("webhook certificates need at least one DNS name")
	}
	// cert-controller fills an existing Secret; create it empty so that a
	// fresh install needs nothing provisioned by hand.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.CertSecret.Namespace, Name: w.CertSecret.Name}}
	if err := mgr.GetClient().Create(context.Background(), secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating webhook certificate secret %s: %w", w.CertSecret, err)
	}
	ready := make(chan struct{})
	err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      w.CertSecret,
		CertDir:        w.CertDir,
		CAName:         "userland-webhook-ca",
		CAOrganization: "userland.dev",
		DNSName:        w.DNSNames[0],
		ExtraDNSNames:  w.DNSNames[1:],
		IsReady:        ready,
		Webhooks:       []rotator.WebhookInfo{{Name: w.ConfigName, Type: rotator.Validating}},
		FieldOwner:     FieldOwner,
		// Every replica serves webhooks, so every replica needs the
		// certificate; the Secret is shared and written with conflicts
		// detected.
		RequireLeaderElection: false,
	})
	if err != nil {
		return fmt.Errorf("setting up webhook certificate rotation: %w", err)
	}
	if w.WriteCertsToDir {
		if err := mgr.Add(webhookStarter(func(ctx context.Context) error {
			return copyCertsToDir(ctx, mgr.GetAPIReader(), w.CertSecret, w.CertDir)
		})); err != nil {
			return fmt.Errorf("adding certificate writer: %w", err)
		}
	}
	return mgr.Add(webhookStarter(func(ctx context.Context) error {
		select {
		case <-ready:
		case <-ctx.Done():
			return nil
		}
		if err := webhook.Setup(mgr, ps); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}))
}

// webhookStarter runs on every replica, leader or not: all of them serve
// admission requests.
type webhookStarter func(context.Context) error

func (f webhookStarter) Start(ctx context.Context) error { return f(ctx) }

// NeedLeaderElection is false: webhooks are served by every replica.
func (f webhookStarter) NeedLeaderElection() bool { return false }

// copyCertsToDir stands in for the kubelet's secret volume out of a
// cluster: it writes the Secret's key pair into dir whenever it changes.
// It checks every second until the first certificate, then every 30s, the
// same order of delay as a kubelet's volume refresh.
func copyCertsToDir(ctx context.Context, reader client.Reader, key types.NamespacedName, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating certificate directory: %w", err)
	}
	var written string
	interval := time.Second
	for {
		var secret corev1.Secret
		err := reader.Get(ctx, key, &secret)
		if err != nil && !apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).Error(err, "reading webhook certificate", "secret", key)
		}
		crt, tlsKey := secret.Data["tls.crt"], secret.Data["tls.key"]
		if len(crt) > 0 && len(tlsKey) > 0 && string(crt) != written {
			// The key first: the server reloads when the certificate changes.
			if err := os.WriteFile(filepath.Join(dir, "tls.key"), tlsKey, 0o600); err != nil {
				return fmt.Errorf("writing webhook key: %w", err)
			}
			if err := os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600); err != nil {
				return fmt.Errorf("writing webhook certificate: %w", err)
			}
			written = string(crt)
			interval = 30 * time.Second
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}
