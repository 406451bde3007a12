package realnode

import (
	"context"
	"fmt"
	"os"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node's parts each sign in as themselves, with only what they use:
//   - the kubelet as system:node:<name> in system:nodes, which the Node
//     authorizer limits to its own node and its pods' objects;
//   - kube-proxy as system:kube-proxy, which Kubernetes' own
//     system:node-proxier binding covers;
//   - kube-router and CoreDNS as users of their own, bound to the
//     read-only ClusterRoles below.
const (
	kubeRouterUser = "userland:realnode:kube-router"
	corednsUser    = "userland:realnode:coredns"
)

// readOnly is a ClusterRole that may get, list and watch resources.
func readOnly(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	for i := range rules {
		rules[i].Verbs = []string{"get", "list", "watch"}
	}
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

// nodeRoles are the ClusterRoles of kube-router's firewall (the informers
// it starts: pods, namespaces, nodes, Services, endpoints and
// NetworkPolicies; with the router and service proxy off it writes
// nothing) and of CoreDNS's kubernetes plugin (upstream's system:coredns).
func nodeRoles() map[string]*rbacv1.ClusterRole {
	return map[string]*rbacv1.ClusterRole{
		kubeRouterUser: readOnly("userland-realnode-kube-router",
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "nodes", "services", "endpoints"}},
			rbacv1.PolicyRule{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}},
			rbacv1.PolicyRule{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}},
		),
		corednsUser: readOnly("userland-realnode-coredns",
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}},
			rbacv1.PolicyRule{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}},
		),
	}
}

// writeIdentities writes the CA, the kubelet's serving certificate, each
// part's kubeconfig, and the ClusterRoles and bindings.
func (n *Node) writeIdentities(ctx context.Context) error {
	c := n.Cluster
	cert, key, err := c.IssueServingCertificate(NodeName, NodeIP, NodeName)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"ca.crt": c.CACertPEM(), "kubelet-serving.crt": cert, "kubelet-serving.key": key} {
		if err := os.WriteFile(n.path("pki", name), data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	users := map[string][]string{
		"kubelet":     {"system:node:" + NodeName, "system:nodes"},
		"kube-proxy":  {"system:kube-proxy"},
		"kube-router": {kubeRouterUser},
		"coredns":     {corednsUser},
	}
	for file, u := range users {
		cfg, err := c.ClientCertConfig(u[0], u[1:]...)
		if err != nil {
			return err
		}
		path := n.kubeconfig(file)
		if file == "coredns" {
			// Mounted into CoreDNS's pod with its Corefile.
			path = n.path(corednsDir, "kubeconfig")
		}
		if err := c.WriteKubeconfig(path, cfg); err != nil {
			return err
		}
	}
	for user, role := range nodeRoles() {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}
		if err := c.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterRole %s: %w", role.Name, err)
		}
		if err := c.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterRoleBinding %s: %w", binding.Name, err)
		}
	}
	return nil
}
