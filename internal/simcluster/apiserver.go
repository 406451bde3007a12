package simcluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// startAPI starts etcd and kube-apiserver with a certificate authority of
// the cluster's own, an admin client and kubeconfig, and the CRDs.
func (c *Cluster) startAPI(ctx context.Context, bins string) error {
	pki := filepath.Join(c.Dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return fmt.Errorf("creating certificate directory: %w", err)
	}
	var ca *authority
	var err error
	if c.opts.StateDir != "" {
		ca, err = stateAuthority(filepath.Join(c.opts.StateDir, "pki"))
	} else {
		ca, err = newAuthority()
	}
	if err != nil {
		return err
	}
	c.ca = ca
	bindAddress := "127.0.0.1"
	if c.opts.BindAddress != "" {
		bindAddress = c.opts.BindAddress
	}
	hosts := []string{"127.0.0.1", "localhost"}
	if bindAddress != "127.0.0.1" {
		// Pods reach it at the kubernetes Service's first address too, by
		// name or by IP, once a real node runs them.
		hosts = append(hosts, bindAddress, "10.96.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	}
	servingCert, servingKey, err := ca.issue("kube-apiserver", nil, hosts)
	if err != nil {
		return err
	}
	saPublic, saPrivate, err := serviceAccountKeys()
	if err != nil {
		return err
	}
	files := map[string][]byte{"ca.crt": ca.certPEM, "apiserver.crt": servingCert, "apiserver.key": servingKey, "sa.pub": saPublic, "sa.key": saPrivate}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(pki, name), data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}

	etcdPort, err := FreePort()
	if err != nil {
		return err
	}
	peerPort, err := FreePort()
	if err != nil {
		return err
	}
	dataDir := filepath.Join(c.Dir, "etcd")
	if c.opts.StateDir != "" {
		dataDir = filepath.Join(c.opts.StateDir, "etcd")
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("creating etcd data directory: %w", err)
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	etcd, err := StartProcess(c.Dir, "etcd", filepath.Join(bins, "etcd"),
		"--data-dir="+dataDir,
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", peerPort),
		// A throwaway cluster: durability is not worth the fsyncs.
		"--unsafe-no-fsync=true",
	)
	if err != nil {
		return err
	}
	c.processes = append(c.processes, etcd)

	apiPort, err := FreePortOn(bindAddress)
	if c.opts.StateDir != "" {
		var moved bool
		apiPort, moved, err = statePort(c.opts.StateDir)
		if moved {
			c.PortMoved = true
		}
	}
	if err != nil {
		return err
	}
	args := map[string]string{
		"etcd-servers":                     etcdURL,
		"bind-address":                     bindAddress,
		"secure-port":                      strconv.Itoa(apiPort),
		"cert-dir":                         pki,
		"tls-cert-file":                    filepath.Join(pki, "apiserver.crt"),
		"tls-private-key-file":             filepath.Join(pki, "apiserver.key"),
		"client-ca-file":                   filepath.Join(pki, "ca.crt"),
		"authorization-mode":               "RBAC",
		"service-account-issuer":           fmt.Sprintf("https://127.0.0.1:%d/", apiPort),
		"service-account-key-file":         filepath.Join(pki, "sa.pub"),
		"service-account-signing-key-file": filepath.Join(pki, "sa.key"),
		// Pods here never talk to the API server, so they need no tokens.
		"disable-admission-plugins": "ServiceAccount",
		"allow-privileged":          "true",
		// Room for scale tests: a /16 of Services, and in-flight limits
		// that clients in one process do not hit.
		"service-cluster-ip-range":       "10.96.0.0/16",
		"max-requests-inflight":          "2000",
		"max-mutating-requests-inflight": "1000",
	}
	if c.opts.RealNodes {
		if err := c.realNodeArgs(pki, args); err != nil {
			return err
		}
	}
	for k, v := range c.opts.APIServerArgs {
		args[k] = v
	}
	flags := make([]string, 0, len(args))
	for k, v := range args {
		flags = append(flags, "--"+k+"="+v)
	}
	sort.Strings(flags)
	api, err := StartProcess(c.Dir, "kube-apiserver", filepath.Join(bins, "kube-apiserver"), flags...)
	if err != nil {
		return err
	}
	c.processes = append(c.processes, api)

	c.server = "https://" + net.JoinHostPort(bindAddress, strconv.Itoa(apiPort))
	if c.Config, err = c.userConfig("userland-admin", "system:masters"); err != nil {
		return err
	}
	// Clients here are not throttled client-side; the server's limits are
	// what benchmarks measure.
	c.Config.QPS, c.Config.Burst = -1, -1
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	c.KubeconfigPath = filepath.Join(c.Dir, "kubeconfig")
	if err := c.writeKubeconfig(c.KubeconfigPath, c.Config); err != nil {
		return err
	}
	if c.Client, err = client.New(c.Config, client.Options{Scheme: c.Scheme}); err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	return c.installCRDs(ctx)
}

// waitReady waits until the API server answers /readyz.
func (c *Cluster) waitReady(ctx context.Context) error {
	transport, err := rest.TransportFor(c.Config)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	return c.waitFor(ctx, "kube-apiserver", 2*time.Minute, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.server+"/readyz", nil)
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// userConfig is a client configuration for user (in groups) that signs in
// with a client certificate from the cluster's authority.
func (c *Cluster) userConfig(user string, groups ...string) (*rest.Config, error) {
	certPEM, keyPEM, err := c.ca.issue(user, groups, nil)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: c.server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: c.ca.certPEM, CertData: certPEM, KeyData: keyPEM,
		},
	}, nil
}

// writeKubeconfig writes cfg (client-certificate authentication) as a
// kubeconfig file.
func (c *Cluster) writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["simulated"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["simulated"] = &clientcmdapi.Context{Cluster: "simulated", AuthInfo: "user"}
	kc.CurrentContext = "simulated"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// installCRDs creates (or updates) every CustomResourceDefinition in the
// YAML files of opts.CRDDirectoryPaths and waits until each is
// Established.
func (c *Cluster) installCRDs(ctx context.Context) error {
	if len(c.opts.CRDDirectoryPaths) == 0 {
		// RealNodes only (Start checks): the chart installs them.
		return nil
	}
	var crds []*unstructured.Unstructured
	for _, dir := range c.opts.CRDDirectoryPaths {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("reading CRD directory: %w", err)
		}
		for _, entry := range entries {
			if ext := filepath.Ext(entry.Name()); entry.IsDir() || (ext != ".yaml" && ext != ".yml") {
				continue
			}
			objs, err := readObjects(filepath.Join(dir, entry.Name()))
			if err != nil {
				return err
			}
			for _, obj := range objs {
				if obj.GetKind() == "CustomResourceDefinition" {
					crds = append(crds, obj)
				}
			}
		}
	}
	if len(crds) == 0 {
		return fmt.Errorf("no CustomResourceDefinitions in %v", c.opts.CRDDirectoryPaths)
	}
	for _, crd := range crds {
		// Applied, so a persisted cluster (`userland dev`) gets the CRDs
		// of the binary that runs it.
		if err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd), client.FieldOwner("userland-simcluster"), client.ForceOwnership); err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.GetName(), err)
		}
	}
	return c.waitFor(ctx, "CRDs to be established", time.Minute, func(ctx context.Context) (bool, error) {
		for _, crd := range crds {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(crd.GroupVersionKind())
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(crd), live); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			conditions, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
			established := false
			for _, cond := range conditions {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					established = true
				}
			}
			if !established {
				return false, nil
			}
		}
		return true, nil
	})
}
