package controller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/naming"
)

// reconcileNetworkPolicy makes sure the NetworkPolicy shared by the
// template's environments in this namespace exists and is current. Every
// Userland of the template computes the same policy, so after the first
// write the applied hash matches and the rest write nothing.
func (r *UserlandReconciler) reconcileNetworkPolicy(ctx context.Context, s *reconcileState) (ctrl.Result, error) {
	desired := NetworkPolicy(s.ul.Namespace, s.ul.Spec.TemplateRef, s.template.Spec, r.GatewayNamespace, r.GatewaySelector, r.ClusterDNS)
	cached, err := r.getCached(ctx, client.ObjectKeyFromObject(desired), &networkingv1.NetworkPolicy{})
	if err != nil {
		return ctrl.Result{}, err
	}
	if cached == nil {
		// When a class starts, every worker reconciles a Userland of the
		// same template at once and none sees the policy yet: one creates
		// it, the others wait and then find it among its creations
		// (r.created) instead of each sending a create the API server
		// refuses (15 of 16 workers did in the 100-environment benchmark).
		r.sharedCreate.Lock()
		defer r.sharedCreate.Unlock()
	}
	if np, ok := cached.(*networkingv1.NetworkPolicy); ok && !equality.Semantic.DeepEqual(np.Spec, desired.Spec) {
		// Edited by someone else with the applied hash left in place: the
		// hash alone would skip the write and leave every environment of
		// the template as the edit left it. Put it back.
		stale := np.DeepCopy()
		delete(stale.Annotations, AnnotationAppliedHash)
		cached = stale
	}
	if err := r.apply(ctx, s, desired, cached); err != nil {
		if errors.Is(err, errNameConflict) {
			// Fail closed: no pod is made while another party's policy
			// holds the name the pods would be selected by.
			return r.stall(s, v1alpha1.ReasonNameConflict, fmt.Sprintf("a NetworkPolicy named %q exists that Userland does not manage", desired.Name))
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// retireOwnPolicy deletes the per-Userland NetworkPolicy (named after the
// Userland and owned by it) that controllers before the shared policy made,
// once nothing depends on it: the Deployment's pod template carries the
// shared policy's label, and so does every pod of the environment still
// there, a terminating one included. Until then both policies select the
// old pods, and the old one is kept to the template's current rules, so a
// template that narrows its egress narrows it for them too (what two
// policies allow is their union). The pod template gets the label through
// the template's rollout policy, so an upgrade restarts nobody's running
// environment early.
func (r *UserlandReconciler) retireOwnPolicy(ctx context.Context, s *reconcileState) (ctrl.Result, error) {
	cached, err := r.getCached(ctx, client.ObjectKeyFromObject(s.ul), &networkingv1.NetworkPolicy{})
	if err != nil || cached == nil || !metav1.IsControlledBy(cached, s.ul) {
		return ctrl.Result{}, err
	}
	shared := NetworkPolicy(s.ul.Namespace, s.ul.Spec.TemplateRef, s.template.Spec, r.GatewayNamespace, r.GatewaySelector, r.ClusterDNS)
	if !SharedPolicyCovers(shared.Name, s.dep, s.labelled) {
		// The Deployment's and pods' events bring the next look.
		return ctrl.Result{}, r.apply(ctx, s, legacyPolicy(s.ul, shared), cached)
	}
	uid := cached.GetUID()
	if err := r.Client.Delete(ctx, cached, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("deleting the per-Userland NetworkPolicy %s/%s: %w", s.ul.Namespace, s.ul.Name, err)
	}
	return ctrl.Result{}, nil
}

// legacyPolicy is the per-Userland policy of earlier versions with the
// shared policy's current rules: named after ul, owned by it, selecting its
// pods by the Userland label.
func legacyPolicy(ul *v1alpha1.Userland, shared *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy {
	np := shared.DeepCopy()
	np.ObjectMeta = ownedMeta(ul)
	np.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelUserland: ul.Name}}
	return np
}

// SharedPolicyCovers says whether the shared policy named policy selects
// every pod the environment has and will have: dep's pod template (nil:
// no Deployment, so no pods from it) and each of pods carry its label.
func SharedPolicyCovers(policy string, dep *appsv1.Deployment, pods []corev1.Pod) bool {
	if dep != nil && dep.Spec.Template.Labels[LabelNetworkPolicy] != policy {
		return false
	}
	for i := range pods {
		if pods[i].Labels[LabelNetworkPolicy] != policy {
			return false
		}
	}
	return true
}

// Where the cluster's DNS pods are in a kubeadm, kind, EKS, GKE or AKS
// cluster: CoreDNS (or kube-dns) keeps the historical label.
const (
	DefaultClusterDNSNamespace   = "kube-system"
	DefaultClusterDNSPodSelector = "k8s-app=kube-dns"
)

// ClusterDNS is where Internet egress may resolve names: the DNS pods,
// and optionally addresses such as a NodeLocal DNSCache's 169.254.20.10,
// on port 53 only. The zero value means the defaults above.
type ClusterDNS struct {
	// Namespace holds the DNS pods.
	Namespace string
	// Pods selects them within Namespace.
	Pods *metav1.LabelSelector
	// CIDRs are further DNS servers, reached on port 53 only.
	CIDRs []string
}

// ClusterDNSOptions are the controller's flags for ClusterDNS, as given.
type ClusterDNSOptions struct {
	// Namespace of the DNS pods; empty: kube-system.
	Namespace string
	// PodSelector is a label selector of the DNS pods; empty:
	// k8s-app=kube-dns.
	PodSelector string
	// CIDRs are further DNS servers (e.g. NodeLocal DNSCache's
	// 169.254.20.10/32).
	CIDRs []string
}

// Parse checks the options and fills in the defaults.
func (o ClusterDNSOptions) Parse() (ClusterDNS, error) {
	ns := o.Namespace
	if ns == "" {
		ns = DefaultClusterDNSNamespace
	}
	sel := o.PodSelector
	if sel == "" {
		sel = DefaultClusterDNSPodSelector
	}
	pods, err := metav1.ParseToLabelSelector(sel)
	if err != nil {
		return ClusterDNS{}, fmt.Errorf("--cluster-dns-pod-selector %q: %w", sel, err)
	}
	if len(pods.MatchExpressions) == 0 {
		pods.MatchExpressions = nil // as the API server stores it
	}
	for _, c := range o.CIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil || p != p.Masked() {
			return ClusterDNS{}, fmt.Errorf("--cluster-dns-cidrs %q: must be a network in CIDR notation with no host bits set, e.g. 169.254.20.10/32", c)
		}
	}
	return ClusterDNS{Namespace: ns, Pods: pods, CIDRs: o.CIDRs}, nil
}

// orDefault is d, or the default DNS pods when d is the zero value.
func (d ClusterDNS) orDefault() ClusterDNS {
	if d.Namespace != "" || d.Pods != nil || len(d.CIDRs) > 0 {
		return d
	}
	def, err := ClusterDNSOptions{}.Parse()
	if err != nil {
		panic(err) // the defaults are constants
	}
	return def
}

// NetworkPolicy is the one policy that isolates every environment pod of
// the template ref in namespace: it selects the pods by LabelNetworkPolicy
// (which PodTemplateFor sets, overriding any the template's own pod labels
// give) and admits traffic to them only from the gateway's pods in the
// gateway's own namespace, on the HTTP port. Both selectors sit in one
// peer, so they must both match: a pod elsewhere that copies the gateway's
// labels (anyone who can create pods can) is not admitted. A policy admits
// nothing between the pods it selects, so environments of one template are
// as closed to each other as to anyone. Unless network.egress is
// Unrestricted it also limits egress (see EgressRules).
//
// One policy per namespace and template, not one per environment, saves a
// write and an object per environment; its name (naming.TemplateNetworkPolicy)
// is not a possible Userland name. It has no owner: it outlives any one
// Userland, and the shared-policy reconciler deletes it once its template
// is gone and nothing uses it.
func NetworkPolicy(namespace string, ref v1alpha1.TemplateReference, spec *v1alpha1.TemplateSpec, gatewayNamespace string, gateway *metav1.LabelSelector, dns ClusterDNS) *networkingv1.NetworkPolicy {
	name := naming.TemplateNetworkPolicy(ref.Kind, ref.Name)
	np := &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, LabelNetworkPolicy: name},
			Annotations: map[string]string{
				AnnotationTemplateKind: string(ref.Kind.OrDefault()),
				AnnotationTemplateName: ref.Name,
			},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelNetworkPolicy: name}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: gatewayNamespace}},
					PodSelector:       gateway,
				}},
				Ports: []networkingv1.NetworkPolicyPort{{
					Protocol: ptr.To(corev1.ProtocolTCP),
					Port:     ptr.To(intstr.FromInt32(spec.HTTP.Port)),
				}},
			}},
		},
	}
	// Unrestricted writes no egress rules at all: NetworkPolicy cannot say
	// "everything but metadata" portably (CNIs such as Cilium do not match
	// pods or nodes with ipBlocks), and such templates opted in to reach
	// exactly those.
	if v1alpha1.EgressOf(spec.Network) == v1alpha1.EgressInternet {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		var allowed []v1alpha1.CIDR
		if spec.Network != nil {
			allowed = spec.Network.AllowedCIDRs
		}
		np.Spec.Egress = EgressRules(allowed, dns)
	}
	return np
}

// NonPublicCIDRs are the destinations Internet egress denies besides
// v1alpha1.MetadataCIDRs: private (RFC 1918, where pods, Services, nodes
// and usually the API server live), carrier-grade NAT (some clusters' pod
// ranges), loopback and their IPv6 counterparts (unique-local,
// link-local).
var NonPublicCIDRs = struct{ IPv4, IPv6 []string }{
	IPv4: []string{"10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16"},
	IPv6: []string{"fc00::/7", "fe80::/10"},
}

// EgressRules allow DNS on port 53 to the cluster's DNS pods (and dns's
// CIDRs) only, every public address on any port, and the template's
// allowed networks; none of them reaches v1alpha1.MetadataCIDRs. DNS to any
// address would be a tunnel to anywhere on port 53, metadata included.
func EgressRules(allowed []v1alpha1.CIDR, dns ClusterDNS) []networkingv1.NetworkPolicyEgressRule {
	dns = dns.orDefault()
	port := intstr.FromInt32(53)
	dnsRule := networkingv1.NetworkPolicyEgressRule{
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: dns.Namespace}},
			PodSelector:       dns.Pods,
		}},
		Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: ptr.To(corev1.ProtocolUDP), Port: &port},
			{Protocol: ptr.To(corev1.ProtocolTCP), Port: &port},
		},
	}
	for _, c := range dns.CIDRs {
		dnsRule.To = append(dnsRule.To, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
	}
	rules := []networkingv1.NetworkPolicyEgressRule{
		dnsRule,
		{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: union(NonPublicCIDRs.IPv4, metadataWithin("0.0.0.0/0"))}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: union(NonPublicCIDRs.IPv6, metadataWithin("::/0"))}},
		}},
	}
	var extra networkingv1.NetworkPolicyEgressRule
	for _, c := range allowed {
		if insideMetadata(string(c)) {
			// The API server refuses these since metadata was closed;
			// one stored before is dropped rather than obeyed.
			continue
		}
		extra.To = append(extra.To, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: string(c), Except: metadataWithin(string(c))}})
	}
	if len(extra.To) > 0 {
		rules = append(rules, extra)
	}
	return rules
}

// metadataWithin lists the metadata ranges strictly inside cidr (an
// ipBlock's except must be), in v1alpha1.MetadataCIDRs order.
func metadataWithin(cidr string) []string {
	outer, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil
	}
	var in []string
	for _, m := range v1alpha1.MetadataCIDRs {
		p := netip.MustParsePrefix(m)
		if p.Addr().Is4() == outer.Addr().Is4() && p.Bits() > outer.Bits() && outer.Contains(p.Addr()) {
			in = append(in, m)
		}
	}
	return in
}

// insideMetadata says whether every address of cidr is a metadata one.
// Unparsable input is treated as inside, so it is never admitted.
func insideMetadata(cidr string) bool {
	c, err := netip.ParsePrefix(cidr)
	if err != nil {
		return true
	}
	for _, m := range v1alpha1.MetadataCIDRs {
		p := netip.MustParsePrefix(m)
		if p.Addr().Is4() == c.Addr().Is4() && p.Bits() <= c.Bits() && p.Contains(c.Addr()) {
			return true
		}
	}
	return false
}

// union is a followed by those of b it lacks.
func union(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
