package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/naming"
)

// wantIngress is what every environment admits: the gateway's pods in the
// gateway's namespace, on the HTTP port.
var wantIngress = []networkingv1.NetworkPolicyIngressRule{{
	From: []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "userland-system"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "userland-gateway"}},
	}},
	Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(8080))}},
}}

// dnsTo is the DNS rule's peers: the DNS pods of a namespace, then
// addresses.
func dnsTo(ns string, pods map[string]string, cidrs ...string) []networkingv1.NetworkPolicyPeer {
	to := []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: pods},
	}}
	for _, c := range cidrs {
		to = append(to, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
	}
	return to
}

// templateRef refers to the namespace's Template name.
func templateRef(name string) v1alpha1.TemplateReference {
	return v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: name}
}

// sharedPolicy is the name of the NetworkPolicy shared by the environments
// of the namespace's Template name.
func sharedPolicy(template string) string {
	return naming.TemplateNetworkPolicy(v1alpha1.TemplateKindTemplate, template)
}

// sharedSelector is how that policy selects their pods.
func sharedSelector(template string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{controller.LabelNetworkPolicy: sharedPolicy(template)}}
}

var kubeDNS = dnsTo("kube-system", map[string]string{"k8s-app": "kube-dns"})

// block is an ipBlock peer.
func block(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

// internetEgress is Internet egress written out by hand, address by
// address, so a change to any list shows up here: DNS to dns only, the
// public internet without private ranges or cloud metadata, then the
// allowed networks.
func internetEgress(dns []networkingv1.NetworkPolicyPeer, allowed ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyEgressRule {
	port := intstr.FromInt32(53)
	rules := []networkingv1.NetworkPolicyEgressRule{
		{To: dns, Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: &port}, {Protocol: ptr.To(corev1.ProtocolTCP), Port: &port}}},
		{To: []networkingv1.NetworkPolicyPeer{
			block("0.0.0.0/0", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16",
				"168.63.129.16/32", "100.100.100.200/32"),
			block("::/0", "fc00::/7", "fe80::/10", "fd00:ec2::254/128", "fd20:ce::254/128"),
		}},
	}
	if len(allowed) > 0 {
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{To: allowed})
	}
	return rules
}

var (
	ingressOnly = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	both        = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
)

type egressCase struct {
	name    string
	network *v1alpha1.NetworkSpec
	dns     controller.ClusterDNS
	want    networkingv1.NetworkPolicySpec
}

// egressCases are the policies each network setting yields.
func egressCases(t *testing.T) []egressCase {
	custom, err := controller.ClusterDNSOptions{Namespace: "dns", PodSelector: "app=coredns", CIDRs: []string{"169.254.20.10/32"}}.Parse()
	if err != nil {
		t.Fatal(err)
	}
	internet := &v1alpha1.NetworkSpec{Egress: v1alpha1.EgressInternet}
	return []egressCase{
		{name: "no-network", want: networkingv1.NetworkPolicySpec{PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress(kubeDNS)}},
		{name: "egress-unset", network: &v1alpha1.NetworkSpec{},
			want: networkingv1.NetworkPolicySpec{PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress(kubeDNS)}},
		{name: "unrestricted", network: &v1alpha1.NetworkSpec{Egress: v1alpha1.EgressUnrestricted},
			want: networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: wantIngress}},
		{name: "internet", network: internet,
			want: networkingv1.NetworkPolicySpec{PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress(kubeDNS)}},
		{name: "internet-and-campus", network: &v1alpha1.NetworkSpec{Egress: v1alpha1.EgressInternet, AllowedCIDRs: []v1alpha1.CIDR{"10.20.0.0/16", "2001:db8::/32"}},
			want: networkingv1.NetworkPolicySpec{PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress(kubeDNS, block("10.20.0.0/16"), block("2001:db8::/32"))}},
		// An allowed network around a metadata endpoint has it excepted.
		{name: "allowed-around-metadata", network: &v1alpha1.NetworkSpec{Egress: v1alpha1.EgressInternet, AllowedCIDRs: []v1alpha1.CIDR{"0.0.0.0/0", "168.63.0.0/16", "fd00::/8"}},
			want: networkingv1.NetworkPolicySpec{PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress(kubeDNS,
				block("0.0.0.0/0", "169.254.0.0/16", "168.63.129.16/32", "100.100.100.200/32"),
				block("168.63.0.0/16", "168.63.129.16/32"),
				block("fd00::/8", "fd00:ec2::254/128", "fd20:ce::254/128"))}},
		// One inside metadata, stored before the API server refused
		// them, is dropped.
		{name: "allowed-inside-metadata", network: &v1alpha1.NetworkSpec{Egress: v1alpha1.EgressInternet, AllowedCIDRs: []v1alpha1.CIDR{"169.254.169.254/32", "168.63.129.16/32", "10.20.0.0/16"}},
			want: networkingv1.NetworkPolicySpec{PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress(kubeDNS, block("10.20.0.0/16"))}},
		{name: "custom-cluster-dns", network: internet, dns: custom,
			want: networkingv1.NetworkPolicySpec{PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress(dnsTo("dns", map[string]string{"app": "coredns"}, "169.254.20.10/32"))}},
	}
}

// TestNetworkPolicyForEachEgressMode checks the policy built for each
// network setting, field by field.
func TestNetworkPolicyForEachEgressMode(t *testing.T) {
	t.Parallel()
	gateway := &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "userland-gateway"}}
	for _, tc := range egressCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := template("ns", tc.name, "example.org/app:1")
			tmpl.Spec.Network = tc.network
			np := controller.NetworkPolicy("ns", templateRef(tc.name), &tmpl.Spec, "userland-system", gateway, tc.dns)
			tc.want.PodSelector = sharedSelector(tc.name)
			if diff := cmp.Diff(tc.want, np.Spec); diff != "" {
				t.Errorf("network policy (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNetworkPoliciesAreValid stores every built policy: the API server
// validates each except (a strict subset of its cidr), selector and port,
// and must store it as built.
func TestNetworkPoliciesAreValid(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	gateway := &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "userland-gateway"}}
	for _, tc := range egressCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := template(ns, tc.name, "example.org/app:1")
			tmpl.Spec.Network = tc.network
			np := controller.NetworkPolicy(ns, templateRef(tc.name), &tmpl.Spec, "userland-system", gateway, tc.dns)
			// Stored as a plain policy: with the controller's label, the
			// shared controller would delete it (its template is never
			// created).
			np.Labels, np.Annotations = nil, nil
			if err := env.Client.Create(context.Background(), np); err != nil {
				t.Fatalf("the API server refused the policy: %v", err)
			}
			var got networkingv1.NetworkPolicy
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(np), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(np.Spec, got.Spec); diff != "" {
				t.Errorf("stored policy (-built +stored):\n%s", diff)
			}
		})
	}
}

// TestNetworkPolicyForEveryEgressSetting checks, for each template
// network setting as the API server stores it (defaults included), the
// NetworkPolicy the controller writes.
func TestNetworkPolicyForEveryEgressSetting(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ns := env.Namespace(t)
	cases := []struct {
		name    string
		network *v1alpha1.NetworkSpec
		want    networkingv1.NetworkPolicySpec
	}{
		// Unset, the API server defaults network to {egress: Internet}.
		{"no-network", nil, networkingv1.NetworkPolicySpec{PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress(kubeDNS)}},
		{"unrestricted", &v1alpha1.NetworkSpec{Egress: v1alpha1.EgressUnrestricted}, networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: wantIngress}},
		{"internet", &v1alpha1.NetworkSpec{Egress: v1alpha1.EgressInternet}, networkingv1.NetworkPolicySpec{PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress(kubeDNS)}},
		{"internet-and-campus", &v1alpha1.NetworkSpec{Egress: v1alpha1.EgressInternet, AllowedCIDRs: []v1alpha1.CIDR{"10.20.0.0/16", "2001:db8::/32"}},
			networkingv1.NetworkPolicySpec{PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress(kubeDNS, block("10.20.0.0/16"), block("2001:db8::/32"))}},
		{"allowed-everywhere", &v1alpha1.NetworkSpec{AllowedCIDRs: []v1alpha1.CIDR{"0.0.0.0/0"}},
			networkingv1.NetworkPolicySpec{PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress(kubeDNS,
				block("0.0.0.0/0", "169.254.0.0/16", "168.63.129.16/32", "100.100.100.200/32"))}},
	}
	for _, tc := range cases {
		tmpl := template(ns, tc.name, "example.org/app:1")
		tmpl.Spec.Network = tc.network
		create(t, tmpl, userland(ns, tc.name, "alice", tc.name))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env.WaitPhase(t, ns, tc.name, v1alpha1.PhaseReady)
			var np networkingv1.NetworkPolicy
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: sharedPolicy(tc.name)}, &np); err != nil {
				t.Fatal(err)
			}
			tc.want.PodSelector = sharedSelector(tc.name)
			if diff := cmp.Diff(tc.want, np.Spec); diff != "" {
				t.Errorf("network policy (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEgressFollowsTheTemplate opens egress of a running environment
// (Unrestricted) and limits it again; the policy follows both ways.
func TestEgressFollowsTheTemplate(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ns := env.Namespace(t)
	create(t, template(ns, "t", "example.org/app:1"), userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	setNetwork := func(n *v1alpha1.NetworkSpec) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var tmpl v1alpha1.Template
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "t"}, &tmpl); err != nil {
				return err
			}
			tmpl.Spec.Network = n
			return env.Client.Update(context.Background(), &tmpl)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	egressIs := func(want []networkingv1.NetworkPolicyEgressRule, types int) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			var np networkingv1.NetworkPolicy
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sharedPolicy("t")}, &np); err != nil {
				return false, err
			}
			return cmp.Equal(want, np.Spec.Egress) && len(np.Spec.PolicyTypes) == types, nil
		}
	}
	env.Eventually(t, 30*time.Second, "egress limited by default", egressIs(internetEgress(kubeDNS), 2))
	setNetwork(&v1alpha1.NetworkSpec{Egress: v1alpha1.EgressUnrestricted})
	env.Eventually(t, 30*time.Second, "egress open", egressIs(nil, 1))
	setNetwork(&v1alpha1.NetworkSpec{Egress: v1alpha1.EgressInternet, AllowedCIDRs: []v1alpha1.CIDR{"10.20.0.0/16"}})
	env.Eventually(t, 30*time.Second, "egress limited again", egressIs(internetEgress(kubeDNS, block("10.20.0.0/16")), 2))
}

// TestClusterDNSOptionsAreChecked: a bad flag fails at start, naming it.
func TestClusterDNSOptionsAreChecked(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		opts controller.ClusterDNSOptions
		want string
	}{
		"selector":  {controller.ClusterDNSOptions{PodSelector: "k8s-app in (kube-dns"}, "--cluster-dns-pod-selector"},
		"cidr":      {controller.ClusterDNSOptions{CIDRs: []string{"169.254.20.10"}}, "--cluster-dns-cidrs"},
		"host bits": {controller.ClusterDNSOptions{CIDRs: []string{"169.254.20.10/24"}}, "--cluster-dns-cidrs"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tc.opts.Parse()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
