package controller_test

import (
	"context"
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

func internetEgress(extra ...string) []networkingv1.NetworkPolicyEgressRule {
	dns := intstr.FromInt32(53)
	rules := []networkingv1.NetworkPolicyEgressRule{
		{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: &dns}, {Protocol: ptr.To(corev1.ProtocolTCP), Port: &dns}}},
		{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16"}}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: []string{"fc00::/7", "fe80::/10"}}},
		}},
	}
	if len(extra) > 0 {
		var to []networkingv1.NetworkPolicyPeer
		for _, c := range extra {
			to = append(to, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
		}
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{To: to})
	}
	return rules
}

// TestNetworkPolicyForEveryEgressSetting checks, for each template
// network setting, the NetworkPolicy the API server stores.
func TestNetworkPolicyForEveryEgressSetting(t *testing.T) {
	startController(t)
	ns := env.Namespace(t)
	ingressOnly := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	both := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	cases := []struct {
		name    string
		network *v1alpha1.NetworkSpec
		want    networkingv1.NetworkPolicySpec
	}{
		{"no-network", nil, networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: wantIngress}},
		{"unrestricted", &v1alpha1.NetworkSpec{Egress: v1alpha1.EgressUnrestricted}, networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: wantIngress}},
		{"internet", &v1alpha1.NetworkSpec{Egress: v1alpha1.EgressInternet}, networkingv1.NetworkPolicySpec{PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress()}},
		{"internet-and-campus", &v1alpha1.NetworkSpec{Egress: v1alpha1.EgressInternet, AllowedCIDRs: []v1alpha1.CIDR{"10.20.0.0/16", "2001:db8::/32"}},
			networkingv1.NetworkPolicySpec{PolicyTypes: both, Ingress: wantIngress, Egress: internetEgress("10.20.0.0/16", "2001:db8::/32")}},
	}
	for _, tc := range cases {
		tmpl := template(ns, tc.name, "example.org/app:1")
		tmpl.Spec.Network = tc.network
		create(t, tmpl, userland(ns, tc.name, "alice", tc.name))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			waitPhase(t, ns, tc.name, v1alpha1.PhaseReady)
			var np networkingv1.NetworkPolicy
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: tc.name}, &np); err != nil {
				t.Fatal(err)
			}
			tc.want.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelUserland: tc.name}}
			if diff := cmp.Diff(tc.want, np.Spec); diff != "" {
				t.Errorf("network policy (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEgressFollowsTheTemplate turns Internet egress on for a running
// environment and off again; the policy follows both ways.
func TestEgressFollowsTheTemplate(t *testing.T) {
	startController(t)
	ns := env.Namespace(t)
	create(t, template(ns, "t", "example.org/app:1"), userland(ns, "u", "alice", "t"))
	waitPhase(t, ns, "u", v1alpha1.PhaseReady)
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
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "u"}, &np); err != nil {
				return false, err
			}
			return cmp.Equal(want, np.Spec.Egress) && len(np.Spec.PolicyTypes) == types, nil
		}
	}
	setNetwork(&v1alpha1.NetworkSpec{Egress: v1alpha1.EgressInternet, AllowedCIDRs: []v1alpha1.CIDR{"10.20.0.0/16"}})
	eventually(t, 30*time.Second, "egress limited", egressIs(internetEgress("10.20.0.0/16"), 2))
	setNetwork(nil)
	eventually(t, 30*time.Second, "egress open again", egressIs(nil, 1))
}
