package simcluster

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
)

// realNodeArgs adds to the API server's flags what real kubelets need
// (Options.RealNodes), writing the client certificate it calls them with.
func (c *Cluster) realNodeArgs(pki string, args map[string]string) error {
	// The API server calls kubelets (logs, exec, port-forward) as a member
	// of system:masters: the kubelet's webhook authorization asks the API
	// server, which allows it everything, as kubeadm's setup does.
	cert, key, err := c.ca.issue("kube-apiserver-kubelet-client", []string{"system:masters"}, nil)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"kubelet-client.crt": cert, "kubelet-client.key": key} {
		if err := os.WriteFile(filepath.Join(pki, name), data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	// Node authorization limits each kubelet (system:node:<name> in
	// system:nodes) to its own node and the objects its pods use;
	// NodeRestriction stops it from changing other nodes.
	args["authorization-mode"] = "Node,RBAC"
	args["enable-admission-plugins"] = "NodeRestriction"
	args["kubelet-client-certificate"] = filepath.Join(pki, "kubelet-client.crt")
	args["kubelet-client-key"] = filepath.Join(pki, "kubelet-client.key")
	args["kubelet-certificate-authority"] = filepath.Join(pki, "ca.crt")
	// A node in a network namespace has an address the host reaches but
	// a hostname that resolves nowhere.
	args["kubelet-preferred-address-types"] = "InternalIP,Hostname"
	// Pods on real nodes talk to the API server as their ServiceAccount
	// (the chart's controller and gateway): the ServiceAccount admission
	// plugin gives them the projected token volume, which the kubelet
	// fills with a token the API server signs with sa.key
	// (--service-account-signing-key-file, set for every mode).
	delete(args, "disable-admission-plugins")
	return nil
}

// controllerManagerArgs are kube-controller-manager's flags beyond
// startFull's for real nodes: every controller, the ServiceAccount token
// controller included, with the keys and CA it signs and publishes with.
// The root-ca-cert-publisher (on in every mode) fills the kube-root-ca.crt
// ConfigMap of each namespace from rootCA, which every projected token
// volume mounts as ca.crt.
func (c *Cluster) controllerManagerArgs() []string {
	if !c.opts.RealNodes {
		// The token controller needs the service-account signing key;
		// pods on kwok nodes never talk to the API server, so it is left
		// out.
		return []string{"--controllers=*,-serviceaccount-token-controller"}
	}
	pki := filepath.Join(c.Dir, "pki")
	return []string{
		"--controllers=*",
		"--service-account-private-key-file=" + filepath.Join(pki, "sa.key"),
		"--root-ca-file=" + filepath.Join(pki, "ca.crt"),
	}
}

// Server is the API server's URL.
func (c *Cluster) Server() string { return c.server }

// CACertPEM is the cluster's certificate authority: the API server's
// serving certificate and every client certificate chain to it.
func (c *Cluster) CACertPEM() []byte { return c.ca.certPEM }

// IssueClientCertificate signs a client certificate for user in groups (the
// API server reads the common name as the user, the organisations as the
// groups): a kubelet is system:node:<name> in system:nodes.
func (c *Cluster) IssueClientCertificate(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	return c.ca.issue(user, groups, nil)
}

// IssueServingCertificate signs a serving certificate for hosts (IP
// addresses or DNS names), e.g. a kubelet's, which the API server checks
// when it calls the kubelet.
func (c *Cluster) IssueServingCertificate(name string, hosts ...string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, fmt.Errorf("a serving certificate for %s needs a host", name)
	}
	return c.ca.issue(name, nil, hosts)
}

// WriteKubeconfig writes cfg, which must sign in with a client
// certificate, as a kubeconfig file.
func (c *Cluster) WriteKubeconfig(path string, cfg *rest.Config) error {
	return c.writeKubeconfig(path, cfg)
}

// ClientCertConfig is a client configuration for user in groups that signs
// in with a client certificate of its own (no impersonation): for
// components such as a node's kube-proxy that run as their own process.
func (c *Cluster) ClientCertConfig(user string, groups ...string) (*rest.Config, error) {
	return c.userConfig(user, groups...)
}
