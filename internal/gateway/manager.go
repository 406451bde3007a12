package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/gateway/proxy"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// Options configure `userland gateway`.
type Options struct {
	// Listen is the address users connect to.
	Listen string
	// MetricsAddr serves Prometheus metrics ("0" disables).
	MetricsAddr string
	// PprofAddr serves net/http/pprof when set (profiling benchmarks).
	PprofAddr string
	// AuthMode is "static", "header", "oidc" or "github".
	AuthMode string
	// StaticUsersFile lists static users (static mode).
	StaticUsersFile string
	// TrustedUserHeader, TrustedEmailHeader and TrustedGroupsHeader name
	// the identity headers (header mode).
	TrustedUserHeader, TrustedEmailHeader, TrustedGroupsHeader string
	// TrustedProxies are the CIDRs identity headers are accepted from.
	TrustedProxies []string
	// SessionKeysFile holds session keys, newest first, one per line.
	SessionKeysFile string
	// SessionTTL bounds a session's life.
	SessionTTL time.Duration
	// InsecureCookies drops the Secure flag (plain-HTTP local use only).
	InsecureCookies bool
	// AdminGroups may reach every environment.
	AdminGroups []string
	// BaseDomain is the environment domain (subdomain routing).
	BaseDomain string
	// PublicURL is the main host's external URL; required with BaseDomain.
	PublicURL string
	// UpstreamHeaderTimeout bounds the wait for an environment's response
	// headers.
	UpstreamHeaderTimeout time.Duration
	// Limits cap what one user can hold open.
	Limits Limits
	// TrustedProxySecretFile holds a secret the trusted proxy must send in
	// TrustedProxySecretHeader (header mode).
	TrustedProxySecretFile, TrustedProxySecretHeader string
	// WakeTimeout bounds held requests while an environment starts.
	WakeTimeout time.Duration
	// ActivityInterval is the most often activity is written per
	// environment.
	ActivityInterval time.Duration
	// Resolver overrides how Services are reached (dev mode, tests).
	Resolver proxy.Resolver
	// Dial overrides how the addresses Resolver returns are connected to
	// (`userland dev --real-node`: from inside the node's network
	// namespace); nil: a plain dialer.
	Dial proxy.Dial
	// OIDC configures --auth-mode=oidc; ClientSecret comes from
	// OIDCClientSecretFile.
	OIDC auth.OIDCConfig
	// OIDCClientSecretFile holds the OIDC client secret.
	OIDCClientSecretFile string
	// GitHub configures --auth-mode=github; ClientSecret comes from
	// GitHubClientSecretFile.
	GitHub auth.GitHubConfig
	// GitHubClientSecretFile holds the GitHub OAuth app's client secret.
	GitHubClientSecretFile string
	// ClusterTemplateNamespace receives Userlands auto-provisioned from
	// ClusterTemplates; empty disables that.
	ClusterTemplateNamespace string
	// RBACUserPrefix and RBACGroupPrefix turn the identity provider's
	// user and group names into the names RBAC bindings use when the
	// gateway asks the API server whether a person may act (as
	// kube-apiserver's --oidc-username-prefix and --oidc-groups-prefix:
	// with "oidc:", the IdP's alice is RBAC's oidc:alice). Empty: as is.
	RBACUserPrefix, RBACGroupPrefix string
	// Registry receives the gateway's metrics (nil: controller-runtime's,
	// which the metrics server serves). Several gateways in one process
	// (tests) need one each.
	Registry prometheus.Registerer

	// DropCookies are request cookies no environment receives besides the
	// gateway's own: names, or prefixes ending in "*" (a single sign-on
	// cookie on a parent domain the environment hosts share). In header
	// mode oauth2-proxy's (proxy.OAuth2ProxyCookies) are added, unless
	// ForwardOAuth2ProxyCookies.
	DropCookies []string
	// ForwardOAuth2ProxyCookies lets oauth2-proxy's cookies reach
	// environments in header mode.
	ForwardOAuth2ProxyCookies bool
	// ForwardAuthorization lets the Authorization header reach
	// environments in header mode, where it is dropped by default: the
	// authenticating proxy may pass its token there.
	ForwardAuthorization bool
	// ForwardedBy are the CIDRs of the proxies in front of the gateway
	// whose X-Forwarded-For names the client, which static sign-in
	// throttles per address.
	ForwardedBy []string
}

// ParseSessionKeys reads keys, one per line: base64 of 64 random bytes
// (`openssl rand -base64 64`), the first half signing, the second
// encrypting. Blank lines and # comments are ignored.
func ParseSessionKeys(data string) ([]session.Key, error) {
	var keys []session.Key
	for i, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(raw) != 64 {
			return nil, fmt.Errorf("session key on line %d: want base64 of 64 random bytes (openssl rand -base64 64)", i+1)
		}
		keys = append(keys, session.Key{Hash: raw[:32], Block: raw[32:]})
	}
	if len(keys) == 0 {
		return nil, errors.New("no session keys found")
	}
	return keys, nil
}

// NewManager builds a manager whose caches feed a gateway Server listening
// on opts.Listen.
func NewManager(cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	var registry prometheus.Registerer = crmetrics.Registry
	if opts.Registry != nil {
		registry = opts.Registry
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:           v1alpha1.NewScheme(),
		Metrics:          metricsserver.Options{BindAddress: opts.MetricsAddr},
		PprofBindAddress: opts.PprofAddr,
		// The gateway reconciles nothing; every replica serves.
		LeaderElection: false,
		Cache:          CacheOptions(),
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := AddIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("indexing environment hosts: %w", err)
	}
	srv, err := NewServer(opts, Deps{Reader: mgr.GetCache(), Writer: mgr.GetClient(), Events: mgr.GetAPIReader(), Registry: registry})
	if err != nil {
		return nil, err
	}
	// Informers for what the request path reads.
	for _, obj := range Watched() {
		if _, err := mgr.GetCache().GetInformer(context.Background(), obj); err != nil {
			return nil, fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	synced := make(chan struct{})
	srv.Ready = func() bool {
		select {
		case <-synced:
			return true
		default:
			return false
		}
	}
	if err := mgr.Add(serving(func(ctx context.Context) error {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			close(synced)
		}
		return nil
	})); err != nil {
		return nil, err
	}
	if err := mgr.Add(serving(srv.Activity.Start)); err != nil {
		return nil, err
	}
	// No ReadTimeout or WriteTimeout: uploads, downloads and streams into
	// environments may legitimately take long. Headers must arrive within
	// ReadHeaderTimeout, the gateway's own forms within formReadTimeout,
	// and an idle keep-alive connection is closed after IdleTimeout.
	httpServer := &http.Server{
		Addr: opts.Listen, Handler: srv.Handler(ctrl.Log.WithName("access")),
		ReadHeaderTimeout: 20 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
	}
	if err := mgr.Add(serving(func(ctx context.Context) error {
		errs := make(chan error, 1)
		go func() { errs <- httpServer.ListenAndServe() }()
		select {
		case err := <-errs:
			return fmt.Errorf("gateway listener: %w", err)
		case <-ctx.Done():
		}
		// Drain: requests in flight finish; WebSockets, which Shutdown does
		// not track, get a close frame (1001, going away) so their apps
		// reconnect to another replica instead of seeing a dropped
		// connection.
		shutdown, cancel := context.WithTimeout(context.Background(), 25*time.Second)
		defer cancel()
		closed := make(chan int, 1)
		go func() { closed <- srv.Proxy.CloseWebSockets(shutdown) }()
		err := httpServer.Shutdown(shutdown)
		ctrl.Log.WithName("gateway").Info("shut down", "webSocketsClosed", <-closed)
		return err
	})); err != nil {
		return nil, err
	}
	return mgr, nil
}

// serving is a Runnable every gateway replica runs.
type serving func(context.Context) error

func (f serving) Start(ctx context.Context) error { return f(ctx) }

// NeedLeaderElection is false: every replica serves.
func (f serving) NeedLeaderElection() bool { return false }
