package devenv

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/gateway/auth"
	"github.com/userland-dev/userland/internal/gateway/proxy"
	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/webhook"
)

// run starts the controller (with its webhooks) and the gateway.
func (s *Stack) run(ctx context.Context) error {
	webhookPort, err := simcluster.FreePort()
	if err != nil {
		return err
	}
	if err := s.installWebhooks(ctx, webhookPort); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(s.opts.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", s.opts.Listen, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	s.URL = "http://" + net.JoinHostPort(host, port)
	// The gateway's port is checked before anything else starts, so a
	// busy port is a clear error rather than a manager failing later.
	if l, err := net.Listen("tcp", s.opts.Listen); err != nil {
		return fmt.Errorf("the dashboard's address %s is busy (use --listen): %w", s.opts.Listen, err)
	} else {
		_ = l.Close()
	}

	stateFiles, err := s.gatewayFiles()
	if err != nil {
		return err
	}
	if s.opts.NewController == nil {
		return errors.New("devenv: Options.NewController is required")
	}
	ctrlMgr, err := s.opts.NewController(s.Config, ControllerSettings{
		GatewayURL: s.URL, GatewaySelector: "app.kubernetes.io/name=userland-gateway",
		GatewayNamespace: SystemNamespace, BaseDomain: EnvironmentDomain,
		Webhooks: &webhook.Options{
			Host: "127.0.0.1", Port: webhookPort, CertDir: filepath.Join(s.opts.StateDir, "run", "webhook-certs"),
			PodSecurityLevel: "baseline", SelfSignedCerts: true,
			CertSecret: types.NamespacedName{Namespace: SystemNamespace, Name: "userland-webhook-cert"},
			ConfigName: WebhookConfigName,
			DNSNames:   []string{"userland-webhook-service." + SystemNamespace + ".svc", "localhost"},
			// No kubelet mounts the Secret here.
			WriteCertsToDir: true,
		},
	})
	if err != nil {
		return fmt.Errorf("creating the controller: %w", err)
	}
	var resolver proxy.Resolver = s.apps
	var dial proxy.Dial
	if !s.Simulated {
		resolver = nil // real pods: their Services by cluster DNS
	}
	if s.node != nil {
		// The host reaches neither the pods nor the cluster's DNS: the
		// gateway connects from inside the node, as an in-cluster one
		// would (NetworkPolicy admits the node's own traffic).
		dial = s.node.ClusterDialContext
	}
	gwMgr, err := gateway.NewManager(s.Config, gateway.Options{
		Listen: s.opts.Listen, MetricsAddr: "0", AuthMode: "static",
		StaticUsersFile: stateFiles.users, SessionKeysFile: stateFiles.keys, SessionTTL: 12 * time.Hour,
		InsecureCookies: true, AdminGroups: []string{AdminGroup},
		WakeTimeout: time.Minute, ActivityInterval: 30 * time.Second, Resolver: resolver, Dial: dial,
		PublicURL: s.URL, BaseDomain: EnvironmentDomain,
		Limits: gateway.Limits{WebSocketsPerUser: 64, WaitingPerUser: 32},
		// Dev mode serves no metrics; a registry of its own lets one
		// process start a stack after another (tests, the bench).
		Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		return fmt.Errorf("creating the gateway: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.launch("controller", func() error { return ctrlMgr.Start(runCtx) })
	s.launch("gateway", func() error { return gwMgr.Start(runCtx) })
	if s.node != nil {
		// Counted with the managers, so Stop waits for it before it
		// stops the node.
		s.running.Add(1)
		go func() {
			defer s.running.Done()
			s.bindClaims(runCtx)
		}()
	}

	s.logf("waiting for the webhooks and the gateway …")
	if err := s.waitServing(ctx); err != nil {
		return err
	}
	return nil
}

type gatewayFiles struct{ users, keys string }

// gatewayFiles writes the demo users (bcrypt) and, once, the session key,
// so sign-ins survive a restart.
func (s *Stack) gatewayFiles() (gatewayFiles, error) {
	files := gatewayFiles{users: filepath.Join(s.opts.StateDir, "users.yaml"), keys: filepath.Join(s.opts.StateDir, "session.keys")}
	if _, err := os.Stat(files.keys); err != nil {
		key := make([]byte, 64)
		if _, err := rand.Read(key); err != nil {
			return files, err
		}
		if err := os.WriteFile(files.keys, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
			return files, fmt.Errorf("writing the session key: %w", err)
		}
	}
	var users []auth.StaticUser
	for _, u := range DemoUsers {
		hash, err := bcrypt.GenerateFromPassword([]byte(DemoPassword), bcrypt.MinCost)
		if err != nil {
			return files, err
		}
		users = append(users, auth.StaticUser{Name: u.Name, Email: u.Email, Groups: u.Groups, PasswordHash: string(hash)})
	}
	data, err := yaml.Marshal(map[string]any{"users": users})
	if err != nil {
		return files, err
	}
	return files, os.WriteFile(files.users, data, 0o600)
}

// waitServing waits until the API server's calls to the webhooks succeed
// (a dry-run Template create) and the gateway is ready.
func (s *Stack) waitServing(ctx context.Context) error {
	// The probe is the VS Code sample under another name, dry-run created:
	// the webhooks answer for it without anything being stored.
	samples, err := objectsIn("samples/template-vscode.yaml")
	if err != nil {
		return err
	}
	probe := samples[0]
	probe.SetNamespace(DemoNamespace)
	probe.SetName("webhook-probe")
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-s.exited:
			return false, fmt.Errorf("stopped while starting: %w", s.exitError())
		default:
		}
		if lastErr = s.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll); lastErr != nil {
			return false, nil
		}
		resp, err := http.Get(s.URL + "/readyz")
		if err != nil {
			lastErr = err
			return false, nil
		}
		_ = resp.Body.Close()
		lastErr = fmt.Errorf("gateway /readyz: %s", resp.Status)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil && lastErr != nil {
		return fmt.Errorf("the webhooks and gateway did not come up: %w (last: %w)", err, lastErr)
	}
	if err != nil {
		return fmt.Errorf("the webhooks and gateway did not come up: %w", err)
	}
	return nil
}
