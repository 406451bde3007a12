package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/userland-dev/userland/internal/apilimits"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/gctune"
)

func newGatewayCommand() *cobra.Command {
	opts := gateway.Options{}
	var kubeconfig, staticUpstream string
	var qps float32
	var burst int
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Run the gateway: sign-in, routing, proxying, wake-on-request",
		Long: `Run the gateway users talk to. It signs users in, routes each only to
their own environment (HTTP and WebSocket), wakes stopped environments and
records activity. Every flag can also be set with an environment variable:
--session-keys-file is USERLAND_SESSION_KEYS_FILE, and so on.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return flagsFromEnv(cmd.Flags())
		},
		RunE: func(_ *cobra.Command, _ []string) error {
			// Logs, the access log above all (a line per request), are
			// written in batches of up to 256 KiB at least once a second:
			// one write(2) per request was a measurable share of the
			// gateway's CPU. Stop flushes what is left on exit.
			logs := &zapcore.BufferedWriteSyncer{WS: zapcore.AddSync(os.Stderr), Size: 256 << 10, FlushInterval: time.Second}
			defer func() { _ = logs.Stop() }()
			ctrl.SetLogger(zap.New(zap.WriteTo(logs)))
			gctune.Apply(context.Background(), gctune.Proxy, ctrl.Log.WithName("gc"))
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			apilimits.Apply(cfg, qps, burst)
			apilimits.RegisterMetrics()
			if staticUpstream != "" {
				opts.Resolver = &gateway.StaticResolver{Default: staticUpstream}
			}
			mgr, err := gateway.NewManager(cfg, opts)
			if err != nil {
				return err
			}
			return mgr.Start(ctrl.SetupSignalHandler())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Listen, "listen", ":8000", "address users connect to")
	f.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":9090", "address of the Prometheus metrics endpoint (a separate port); 0 disables it")
	f.StringVar(&opts.AuthMode, "auth-mode", "static", "how users sign in: static (users file), header (trusted proxy such as oauth2-proxy), oidc or github")
	f.StringVar(&opts.OIDC.Issuer, "oidc-issuer", "", "OpenID Connect issuer URL (oidc mode)")
	f.StringVar(&opts.OIDC.ClientID, "oidc-client-id", "", "OIDC client ID")
	f.StringVar(&opts.OIDCClientSecretFile, "oidc-client-secret-file", "", "file holding the OIDC client secret (kept out of flags and logs)")
	f.StringVar(&opts.OIDC.RedirectURL, "oidc-redirect-url", "", "the gateway's callback as browsers see it, e.g. https://userland.example.edu/oauth2/callback")
	f.StringSliceVar(&opts.OIDC.Scopes, "oidc-scopes", nil, "scopes to request (default openid,email,profile,groups)")
	f.StringVar(&opts.OIDC.UserClaim, "oidc-user-claim", "email", "claim that is the user: email, preferred_username or sub")
	f.StringVar(&opts.OIDC.GroupsClaim, "oidc-groups-claim", "groups", "claim holding the user's groups")
	f.StringSliceVar(&opts.OIDC.AllowedEmailDomains, "allowed-email-domains", nil, "only users with a verified e-mail in these domains may sign in (oidc mode)")
	f.StringSliceVar(&opts.OIDC.AllowedGroups, "allowed-groups", nil, "only members of these groups may sign in (oidc mode)")
	f.StringVar(&opts.GitHub.ClientID, "github-client-id", "", "GitHub OAuth app client ID (github mode)")
	f.StringVar(&opts.GitHubClientSecretFile, "github-client-secret-file", "", "file holding the GitHub OAuth app's client secret")
	f.StringVar(&opts.GitHub.RedirectURL, "github-redirect-url", "", "the gateway's callback as browsers see it, e.g. https://userland.example.edu/oauth2/callback")
	f.StringVar(&opts.GitHub.URL, "github-url", "https://github.com", "GitHub's web address (a GitHub Enterprise Server's URL for GHES)")
	f.StringVar(&opts.GitHub.APIURL, "github-api-url", "", "GitHub REST API address (default https://api.github.com, or <github-url>/api/v3/ for GHES)")
	f.StringSliceVar(&opts.GitHub.Orgs, "github-orgs", nil, "only active members of these organisations may sign in; each becomes a group")
	f.StringSliceVar(&opts.GitHub.Teams, "github-teams", nil, "only active members of these teams (org/team-slug) may sign in; each becomes a group")
	f.StringVar(&opts.StaticUsersFile, "static-users-file", "", "YAML file of static users with bcrypt password hashes (static mode)")
	f.StringVar(&opts.TrustedUserHeader, "trusted-user-header", "X-Forwarded-User", "header carrying the user (header mode)")
	f.StringVar(&opts.TrustedEmailHeader, "trusted-email-header", "X-Forwarded-Email", "header carrying the e-mail address (header mode)")
	f.StringVar(&opts.TrustedGroupsHeader, "trusted-groups-header", "X-Forwarded-Groups", "header carrying comma-separated groups (header mode)")
	f.StringSliceVar(&opts.TrustedProxies, "trusted-proxies", nil, "CIDRs whose identity headers are believed (header mode); everyone else gets 401")
	f.StringVar(&opts.SessionKeysFile, "session-keys-file", "", "session keys, newest first, one per line: base64 of 64 random bytes (openssl rand -base64 64)")
	f.DurationVar(&opts.SessionTTL, "session-ttl", 12*time.Hour, "how long a sign-in lasts")
	f.BoolVar(&opts.InsecureCookies, "insecure-cookies", false, "send session cookies over plain HTTP (local use only)")
	f.StringSliceVar(&opts.AdminGroups, "admin-groups", nil, "groups whose members may reach every environment")
	f.StringVar(&opts.RBACUserPrefix, "rbac-user-prefix", "", "prefix the gateway puts before a user's name when it asks Kubernetes RBAC (SubjectAccessReview) whether they may act, as kube-apiserver's --oidc-username-prefix: with oidc:, RoleBindings name oidc:alice; empty: names as the identity provider gives them")
	f.StringVar(&opts.RBACGroupPrefix, "rbac-group-prefix", "", "prefix the gateway puts before each of a user's groups when it asks Kubernetes RBAC, as kube-apiserver's --oidc-groups-prefix; empty: groups as the identity provider gives them")
	f.StringVar(&opts.BaseDomain, "base-domain", "", "environment domain: each environment gets its own host <name>--<namespace>.<base-domain> (hashed when ambiguous or too long), its own browser origin; best a different registrable domain from --public-url's host")
	f.StringVar(&opts.PublicURL, "public-url", "", "the main host's external URL (dashboard and sign-in), e.g. https://userland.example.edu; required with --base-domain")
	f.DurationVar(&opts.UpstreamHeaderTimeout, "upstream-header-timeout", 5*time.Minute, "how long an environment may take to send its response headers before 502; 0 waits forever")
	f.IntVar(&opts.Limits.WebSocketsPerUser, "max-websockets-per-user", 64, "open WebSocket (upgraded) connections one user may hold on a replica; beyond it 429 with Retry-After; 0 means no cap")
	f.IntVar(&opts.Limits.PasswordChecks, "max-password-checks", 0, "static sign-in password checks (bcrypt) running at once across all clients; a sign-in waits up to 20s for one, then gets 429 with Retry-After; 0 means half the CPUs, at least one")
	f.IntVar(&opts.Limits.WaitingPerUser, "max-waiting-per-user", 32, "requests one user may have held on a replica while environments start; beyond it 429 with Retry-After; 0 means no cap")
	f.StringVar(&opts.TrustedProxySecretFile, "trusted-proxy-secret-file", "", "header mode: file holding a secret (16+ characters) the trusted proxy must send, so an address in --trusted-proxies alone is not enough")
	f.StringVar(&opts.TrustedProxySecretHeader, "trusted-proxy-secret-header", "X-Userland-Proxy-Secret", "header mode: the header carrying --trusted-proxy-secret-file's secret (never forwarded to environments)")
	// Kept so that existing installations' arguments still parse.
	f.String("cluster-domain", "cluster.local", "unused: environments are reached at their EndpointSlices' addresses")
	_ = f.MarkDeprecated("cluster-domain", "environments are reached at their EndpointSlices' addresses, not by cluster DNS")
	f.DurationVar(&opts.WakeTimeout, "wake-timeout", time.Minute, "how long XHR and WebSocket requests are held while an environment starts, before 503")
	f.DurationVar(&opts.ActivityInterval, "activity-interval", time.Minute, "the most often one environment's activity is written to the API server")
	f.StringVar(&opts.ClusterTemplateNamespace, "cluster-template-namespace", "", "namespace for Userlands auto-provisioned from ClusterTemplates; empty: ClusterTemplates do not auto-provision")
	f.DurationVar(&opts.Limits.BodyReadTimeout, "body-read-timeout", 20*time.Second, "how long a request's body may take to arrive until the gateway passes the request to an environment (anonymous and refused requests included); then the connection is closed")
	f.StringSliceVar(&opts.DropCookies, "drop-cookies", nil, "request cookies never passed to environments, besides the gateway's own: names, or prefixes ending in * (e.g. a university single sign-on's _shibsession_*); header mode adds oauth2-proxy's _oauth2_proxy and _oauth2_proxy_*")
	f.BoolVar(&opts.ForwardOAuth2ProxyCookies, "forward-oauth2-proxy-cookies", false, "header mode: pass oauth2-proxy's cookies (_oauth2_proxy, _oauth2_proxy_*) to environments, which then hold the proxy's session")
	f.BoolVar(&opts.ForwardAuthorization, "forward-authorization", false, "header mode: pass the Authorization header to environments (dropped by default: the authenticating proxy may put its token there)")
	f.StringSliceVar(&opts.ForwardedBy, "forwarded-by", nil, "CIDRs of the proxies in front of the gateway (the ingress controller) whose X-Forwarded-For names the client: static sign-in throttles failures per client address, which is otherwise the connection's")
	f.StringVar(&opts.GitHub.Identity, "github-identity", "id", "github mode: what spec.user is, id (github:<numeric user ID>, which survives renames) or login (the login name, which another person can take after a rename; only for Userlands made before --github-identity existed, see the migration note)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: in-cluster, then $KUBECONFIG)")
	f.Float32Var(&qps, "kube-api-qps", apilimits.GatewayQPS, "requests per second to the API server (client-side limit; negative: none, leaving it to the API server's priority and fairness): wakes, auto-provisioned Userlands and activity")
	f.IntVar(&burst, "kube-api-burst", apilimits.GatewayBurst, "burst above --kube-api-qps")
	f.StringVar(&staticUpstream, "static-upstream", "", "send every environment's traffic to this host:port instead of its Service (benchmarks and local testing only)")
	_ = f.MarkHidden("static-upstream")
	f.StringVar(&opts.PprofAddr, "pprof-bind-address", "", "address of net/http/pprof; empty disables it (benchmarks)")
	_ = f.MarkHidden("pprof-bind-address")
	return cmd
}

// flagsFromEnv sets each flag not given on the command line from
// USERLAND_<FLAG_NAME>, e.g. --session-keys-file from
// USERLAND_SESSION_KEYS_FILE.
func flagsFromEnv(flags *pflag.FlagSet) error {
	var errs []string
	flags.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		name := "USERLAND_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if err := flags.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			}
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("invalid environment: %s", strings.Join(errs, "; "))
	}
	return nil
}
