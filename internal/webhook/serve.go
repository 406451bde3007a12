package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Options configure the admission webhook server and its certificate.
type Options struct {
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
	// RotatorName names the certificate rotator's controller; empty:
	// cert-controller's "cert-rotator". Controller names must be unique in
	// a process, so a process that builds a second manager serving
	// webhooks (a test or the bench running one dev stack after another)
	// gives each its own.
	RotatorName string
	// GrantRecorders are the user names that may record a budget grant as
	// another person's: the gateway's ServiceAccount, which asks RBAC
	// about the signed-in person and names them. Anyone else names only
	// themself (system:masters aside).
	GrantRecorders []string
}

// NewServer is the webhook server for w; with nil, a default server that
// the manager never starts (no webhook is registered on it).
func NewServer(w *Options) crwebhook.Server {
	if w == nil {
		return crwebhook.NewServer(crwebhook.Options{})
	}
	return crwebhook.NewServer(crwebhook.Options{Host: w.Host, Port: w.Port, CertDir: w.CertDir})
}

// No RBAC markers for the certificate: the chart grants get, list, watch
// and update on the one Secret (a Role in the release namespace) and on
// the one ValidatingWebhookConfiguration (resourceNames), because their
// names come from the release; see charts/userland/templates/rbac.yaml.
// The chart also ships the Secret empty, so the controller never needs
// create, which RBAC cannot limit to a name.

// The webhooks ask the API server whether the requester may do what an
// object asks for (internal/access): linking a Userland to a course needs
// enroll on it, which the controller holds for the Userlands its courses
// create.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=userland.dev,resources=courses,verbs=enroll

// Serve registers the webhooks on mgr, enforcing w's Pod Security level
// on templates. With self-signed certificates it first lets cert-controller
// create them, since the webhook server cannot start without its key pair;
// fieldOwner is the manager's field owner for the Secret and the CA
// injection.
func Serve(mgr ctrl.Manager, w *Options, fieldOwner string) error {
	ps, err := NewPodSecurity(w.PodSecurityLevel)
	if err != nil {
		return err
	}
	if !w.SelfSignedCerts {
		if err := Setup(mgr, ps, w.GrantRecorders); err != nil {
			return err
		}
		return mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker())
	}
	if len(w.DNSNames) == 0 {
		return fmt.Errorf("webhook certificates need at least one DNS name")
	}
	if err := ensureCertSecret(context.Background(), mgr, w.CertSecret); err != nil {
		return err
	}
	ready := make(chan struct{})
	// The rotator's informers list and watch the Secret and the
	// configuration; scoped to their names, so that RBAC can grant them
	// by resourceNames rather than every Secret in the namespace and
	// every webhook configuration in the cluster.
	scoped := nameScoped(mgr.GetConfig(), map[string]string{
		"/api/v1/namespaces/" + w.CertSecret.Namespace + "/secrets":             w.CertSecret.Name,
		"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations": w.ConfigName,
	})
	err = rotator.AddRotator(withConfig{Manager: mgr, config: scoped}, &rotator.CertRotator{
		SecretKey:      w.CertSecret,
		CertDir:        w.CertDir,
		CAName:         "userland-webhook-ca",
		CAOrganization: "userland.dev",
		DNSName:        w.DNSNames[0],
		ExtraDNSNames:  w.DNSNames[1:],
		IsReady:        ready,
		Webhooks:       []rotator.WebhookInfo{{Name: w.ConfigName, Type: rotator.Validating}},
		FieldOwner:     fieldOwner,
		// Every replica serves webhooks, so every replica needs the
		// certificate; the Secret is shared and written with conflicts
		// detected.
		RequireLeaderElection: false,
		ControllerName:        w.RotatorName,
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
	var registered atomic.Bool
	if err := mgr.AddReadyzCheck("webhook", startedOnceRegistered(&registered, mgr)); err != nil {
		return fmt.Errorf("adding the webhook's ready check: %w", err)
	}
	return mgr.Add(webhookStarter(func(ctx context.Context) error {
		select {
		case <-ready:
		case <-ctx.Done():
			return nil
		}
		if err := Setup(mgr, ps, w.GrantRecorders); err != nil {
			return err
		}
		registered.Store(true)
		<-ctx.Done()
		return nil
	}))
}

// startedOnceRegistered is the replica's readiness for admission traffic:
// not ready until its webhook server answers TLS. The webhook's Service
// sends the API server's calls to ready replicas only, and with two
// replicas a call sent to one still waiting for its certificate is
// refused (TestChartOnRealNode saw it). The server is asked for only
// after Setup registered the webhooks: asking the manager for it earlier
// would start it before its key pair exists, and it would fail.
func startedOnceRegistered(registered *atomic.Bool, mgr ctrl.Manager) healthz.Checker {
	return func(req *http.Request) error {
		if !registered.Load() {
			return errors.New("the webhook server waits for its certificate")
		}
		return mgr.GetWebhookServer().StartedChecker()(req)
	}
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

// ensureCertSecret makes sure the certificate Secret exists, since
// cert-controller only fills an existing one. The chart ships it empty, so
// in a cluster this is one get; out of a cluster (`userland dev`, tests)
// the controller's admin credentials create it. Read before create: the
// shipped RBAC grants no create on Secrets at all.
func ensureCertSecret(ctx context.Context, mgr ctrl.Manager, key types.NamespacedName) error {
	var existing corev1.Secret
	err := mgr.GetAPIReader().Get(ctx, key, &existing)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading webhook certificate secret %s: %w", key, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := mgr.GetClient().Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating webhook certificate secret %s (the chart ships it; without the chart create it empty): %w", key, err)
	}
	return nil
}

// withConfig hands cert-controller a manager whose configuration is
// config; it builds its own cache from GetConfig and uses everything else
// (client, scheme, REST mapper, runnables) from the real manager.
type withConfig struct {
	manager.Manager
	config *rest.Config
}

func (m withConfig) GetConfig() *rest.Config { return m.config }

// nameScoped returns a copy of cfg whose list and watch requests on the
// collection paths in names (path → object name) carry
// fieldSelector=metadata.name=<name>. The API server authorizes such a
// list or watch as a request for that one name, so RBAC resourceNames can
// grant it; cert-controller's informers offer no option of their own.
func nameScoped(cfg *rest.Config, names map[string]string) *rest.Config {
	scoped := rest.CopyConfig(cfg)
	scoped.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return nameSelector{next: rt, names: names}
	})
	return scoped
}

type nameSelector struct {
	next  http.RoundTripper
	names map[string]string
}

func (s nameSelector) RoundTrip(req *http.Request) (*http.Response, error) {
	name, ok := s.names[req.URL.Path]
	if !ok || req.Method != http.MethodGet || req.URL.Query().Has("fieldSelector") {
		return s.next.RoundTrip(req)
	}
	// RoundTrippers must not modify the request they are given.
	scoped := req.Clone(req.Context())
	q := scoped.URL.Query()
	q.Set("fieldSelector", fields.OneTermEqualSelector("metadata.name", name).String())
	scoped.URL.RawQuery = q.Encode()
	return s.next.RoundTrip(scoped)
}
