package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/internal/access"
	"github.com/userland-dev/userland/internal/gateway/activity"
	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/gateway/authz"
	"github.com/userland-dev/userland/internal/gateway/dashboard"
	"github.com/userland-dev/userland/internal/gateway/provision"
	"github.com/userland-dev/userland/internal/gateway/proxy"
	"github.com/userland-dev/userland/internal/gateway/session"
)

// Deps are what a gateway reads and writes through.
type Deps struct {
	// Reader is the informer cache the request path reads (indexed with
	// AddIndexes).
	Reader client.Reader
	// Writer writes activity, wakes, actions and auto-provisioned Userlands.
	Writer client.Client
	// Events reads past the cache: Events for the admin page, a course
	// before a roster merge.
	Events client.Reader
	// Registry receives the gateway's metrics.
	Registry prometheus.Registerer
}

// RBACNames maps the identity provider's names to RBAC's, for every
// SubjectAccessReview the gateway asks on a person's behalf.
func (o Options) RBACNames() access.Mapping {
	return access.Mapping{UserPrefix: o.RBACUserPrefix, GroupPrefix: o.RBACGroupPrefix}
}

// NewServer builds a gateway from its options: sign-in mode, sessions,
// routing, limits, the proxy, the dashboard and auto-provisioning. The
// manager (NewManager) and the tests both build gateways with it, so what
// is tested is what ships.
func NewServer(opts Options, deps Deps) (*Server, error) {
	keyData, err := os.ReadFile(opts.SessionKeysFile)
	if err != nil {
		return nil, fmt.Errorf("reading --session-keys-file: %w", err)
	}
	keys, err := ParseSessionKeys(string(keyData))
	if err != nil {
		return nil, err
	}
	store, err := session.NewStore(keys, opts.SessionTTL, !opts.InsecureCookies, nil)
	if err != nil {
		return nil, err
	}
	var publicURL *url.URL
	if opts.PublicURL != "" {
		if publicURL, err = url.Parse(opts.PublicURL); err != nil || publicURL.Host == "" || (publicURL.Scheme != "http" && publicURL.Scheme != "https") {
			return nil, fmt.Errorf("--public-url %q must be an absolute http(s) URL such as https://userland.example.edu", opts.PublicURL)
		}
	}
	if opts.BaseDomain != "" && publicURL == nil && opts.AuthMode != "header" {
		return nil, errors.New("--base-domain needs --public-url: environment hosts send browsers to the main host to sign in")
	}
	if publicURL != nil && opts.BaseDomain != "" && strings.HasSuffix(publicURL.Hostname(), "."+opts.BaseDomain) {
		return nil, fmt.Errorf("--public-url's host %s is inside --base-domain %s: the main host must not be an environment host", publicURL.Hostname(), opts.BaseDomain)
	}
	newProxy := func(extra []string) *proxy.Proxy {
		return proxy.NewWithDial(extra, opts.UpstreamHeaderTimeout, opts.Dial)
	}
	srv := &Server{
		Reader:      deps.Reader,
		Sessions:    store,
		Policy:      authz.Policy{AdminGroups: opts.AdminGroups},
		Activity:    &activity.Recorder{Client: deps.Writer, Interval: opts.ActivityInterval},
		BaseDomain:  opts.BaseDomain,
		PublicURL:   publicURL,
		Limits:      opts.Limits,
		WakeTimeout: opts.WakeTimeout,
		Resolver:    opts.Resolver,
		Metrics:     NewMetrics(deps.Registry),
		Provisioner: &provision.Provisioner{Reader: deps.Reader, Writer: deps.Writer, ClusterTemplateNamespace: opts.ClusterTemplateNamespace},
	}
	srv.Dashboard = &dashboard.Dashboard{
		Reader: deps.Reader, Writer: deps.Writer, Events: deps.Events, Live: deps.Events,
		Policy: srv.Policy, Provisioner: srv.Provisioner, CSRF: store,
		KeepRunning: srv.Activity.KeepRunning,
		Access:      access.Reviewer{Client: deps.Writer},
		RBACNames:   opts.RBACNames(),
	}
	if srv.Resolver == nil {
		srv.Resolver = EndpointSliceResolver{Reader: deps.Reader, Wait: proxy.StartupDialBudget}
	}
	switch opts.AuthMode {
	case "static":
		if srv.Static, err = auth.LoadStaticUsers(opts.StaticUsersFile); err != nil {
			return nil, err
		}
		srv.Proxy = newProxy(nil)
	case "header":
		th := &auth.TrustedHeader{UserHeader: opts.TrustedUserHeader, EmailHeader: opts.TrustedEmailHeader, GroupsHeader: opts.TrustedGroupsHeader}
		if len(opts.TrustedProxies) == 0 {
			return nil, errors.New("--trusted-proxies is required in header mode: identity headers from anyone else are refused")
		}
		for _, c := range opts.TrustedProxies {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				return nil, fmt.Errorf("--trusted-proxies %q: %w", c, err)
			}
			th.Trusted = append(th.Trusted, p)
		}
		if opts.TrustedProxySecretFile != "" {
			secret, err := os.ReadFile(opts.TrustedProxySecretFile)
			if err != nil {
				return nil, fmt.Errorf("reading --trusted-proxy-secret-file: %w", err)
			}
			th.Secret = []byte(strings.TrimSpace(string(secret)))
			th.SecretHeader = opts.TrustedProxySecretHeader
			if len(th.Secret) < 16 || th.SecretHeader == "" {
				return nil, errors.New("--trusted-proxy-secret-file must hold at least 16 characters and --trusted-proxy-secret-header must name a header")
			}
		}
		srv.Header = th
		srv.Proxy = newProxy([]string{opts.TrustedUserHeader, opts.TrustedEmailHeader, opts.TrustedGroupsHeader, opts.TrustedProxySecretHeader})
	case "oidc":
		secret, err := os.ReadFile(opts.OIDCClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("reading --oidc-client-secret-file: %w", err)
		}
		cfg := opts.OIDC
		cfg.ClientSecret = strings.TrimSpace(string(secret))
		if srv.Provider, err = auth.NewOIDC(context.Background(), cfg); err != nil {
			return nil, err
		}
		srv.Proxy = newProxy(nil)
	case "github":
		secret, err := os.ReadFile(opts.GitHubClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("reading --github-client-secret-file: %w", err)
		}
		cfg := opts.GitHub
		cfg.ClientSecret = strings.TrimSpace(string(secret))
		if srv.Provider, err = auth.NewGitHub(cfg); err != nil {
			return nil, err
		}
		srv.Proxy = newProxy(nil)
	default:
		return nil, fmt.Errorf("--auth-mode %q: must be static, header, oidc or github", opts.AuthMode)
	}
	if err := srv.harden(opts); err != nil {
		return nil, err
	}
	return srv, nil
}
