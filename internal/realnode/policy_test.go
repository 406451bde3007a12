//go:build realnode

package realnode_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/testenv"
	"github.com/userland-dev/userland/internal/testobj"
)

// The gateway's pods as the controller is told to admit them.
const (
	gatewayNamespace = "userland-system"
	gatewayLabel     = "app.kubernetes.io/name"
	gatewayName      = "userland-gateway"
)

// TestNetworkPolicyOnRealNode runs the Userland controller against a real
// node and checks, by connecting, what the NetworkPolicies it creates
// enforce: one student's pod reaches neither another student's pod nor
// their Service (by egress and, for a template without egress rules, by
// ingress alone), nor the API server; the gateway's pod reaches them all;
// the kubelet's readiness probes still pass; cluster DNS answers; a public
// address outside the cluster is reached with the default (Internet)
// egress. It relies on no policy's name
// or shape, only on reachability, and creates no policy itself.
func TestNetworkPolicyOnRealNode(t *testing.T) {
	n := startNode(t)
	for _, s := range n.Timings {
		t.Logf("TIMING bring-up step %-32s %s", s.Step, s.After.Round(10*time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := n.Cluster.Client
	stopController := startController(t, n)

	const ns = "class"
	for _, name := range []string{ns, gatewayNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	// alice and bob get the default egress (Internet: DNS and public
	// addresses only); carol's template leaves egress unrestricted, so
	// that what refuses her is the other pods' ingress rules alone.
	tmpl := testobj.MakeTemplate(ns, "probe").Image(probeImage).Obj()
	tmpl.Spec.PodTemplate.Spec.Containers[0].ReadinessProbe = readiness()
	open := testobj.MakeTemplate(ns, "open").Image(probeImage).Obj()
	open.Spec.PodTemplate.Spec.Containers[0].ReadinessProbe = readiness()
	open.Spec.Network = &v1alpha1.NetworkSpec{Egress: v1alpha1.EgressUnrestricted}
	for _, o := range []client.Object{tmpl, open} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	created := time.Now()
	for _, u := range [][2]string{{"alice", "probe"}, {"bob", "probe"}, {"carol", "open"}} {
		if err := c.Create(ctx, testobj.MakeUserland(ns, u[0], u[0], u[1]).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	// The ServiceAccount admission plugin admits a pod once its
	// namespace's default ServiceAccount exists.
	waitServiceAccount(ctx, t, n, gatewayNamespace, "default")
	gateway := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: gatewayNamespace, Name: "gateway", Labels: map[string]string{gatewayLabel: gatewayName}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "probe", Image: probeImage, ReadinessProbe: readiness(),
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
		}}},
	}
	if err := c.Create(ctx, gateway); err != nil {
		t.Fatal(err)
	}

	pods, svcs := map[string]string{}, map[string]string{}
	var students []*corev1.Pod
	for _, u := range []string{"alice", "bob", "carol"} {
		p := readyPod(ctx, t, n, ns, map[string]string{v1alpha1.LabelUserland: u})
		t.Logf("TIMING %s's pod Ready %s after the Userlands were created", u, time.Since(created).Round(10*time.Millisecond))
		students = append(students, p)
		pods[u] = net.JoinHostPort(p.Status.PodIP, "8080")
		svcs[u] = serviceAddr(ctx, t, n, ns, u)
		t.Logf("%s: pod %s, Service %s", u, pods[u], svcs[u])
	}
	alice, bob, carol := students[0].Status.PodIP, students[1].Status.PodIP, students[2].Status.PodIP
	gw := readyPod(ctx, t, n, gatewayNamespace, map[string]string{gatewayLabel: gatewayName}).Status.PodIP
	apiServer := strings.TrimPrefix(n.Cluster.Server(), "https://")
	metadata := metadataStandIn(t, n)
	internet := internetStandIn(t)

	// The controller's policies, whatever their names or number.
	policyCovering(ctx, t, n, ns, students[1])
	for _, tc := range []struct{ from, name, addr string }{
		{alice, "alice → bob's pod", pods["bob"]},
		{alice, "alice → bob's Service", svcs["bob"]},
		{bob, "bob → alice's pod", pods["alice"]},
		{bob, "bob → alice's Service", svcs["alice"]},
		// carol has no egress rules: bob's and alice's ingress refuse her.
		{carol, "carol (no egress rules) → bob's pod", pods["bob"]},
		{carol, "carol (no egress rules) → alice's Service", svcs["alice"]},
		// Internet egress never reaches a private address, nor metadata.
		{alice, "alice → the API server", apiServer},
		{alice, "alice → the kubernetes Service", kubernetesService},
		{alice, "alice → the metadata stand-in on the node", metadata},
	} {
		waited := eventually(ctx, t, n, tc.from, tc.addr, false)
		t.Logf("TIMING %s refused %s after the Userlands were created (waited %s for it here)", tc.name, time.Since(created).Round(10*time.Millisecond), waited.Round(10*time.Millisecond))
	}
	// What is allowed: the gateway reaches every environment, by pod and
	// by Service; carol, with unrestricted egress, reaches the API server
	// (so the refusals above are the policies', not a broken network).
	// The firewall learns the gateway pod's address asynchronously (kube-
	// router syncs its ipsets after the pod appears; one CI run dialled
	// before it had and was refused), so the gateway gets up to a minute,
	// and the wait is reported.
	for _, addr := range []string{pods["alice"], pods["bob"], pods["carol"], svcs["alice"], svcs["bob"], svcs["carol"]} {
		waited := eventually(ctx, t, n, gw, addr, true)
		t.Logf("TIMING the gateway reached %s %s after the Userlands were created (waited %s for it here)", addr, time.Since(created).Round(10*time.Millisecond), waited.Round(10*time.Millisecond))
	}
	// alice's default (Internet) egress reaches a public address outside
	// the cluster, as carol's does. carol, with unrestricted egress,
	// reaches the API server directly and through the kubernetes Service
	// (kube-proxy's rules), so the refusals above are the policies', not a
	// broken network; the gateway's pod reaches the metadata stand-in, so
	// it serves pods.
	for _, tc := range []struct{ from, name, addr string }{
		{alice, "alice (Internet egress) → a public address outside the cluster", internet},
		{carol, "carol (Unrestricted egress) → a public address outside the cluster", internet},
		{carol, "carol → the API server", apiServer},
		{carol, "carol → the kubernetes Service", kubernetesService},
		{gw, "the gateway → the metadata stand-in", metadata},
	} {
		if msg, ok := dial(ctx, n, tc.from, tc.addr); !ok {
			t.Errorf("%s (%s): %s", tc.name, tc.addr, msg)
		} else {
			t.Logf("%s (%s): %s", tc.name, tc.addr, msg)
		}
	}
	// Refused connections stay refused (not a race with a rule being
	// rewritten).
	for range 3 {
		for _, addr := range []string{pods["bob"], svcs["bob"]} {
			if msg, ok := dial(ctx, n, alice, addr); ok {
				t.Errorf("alice reached %s after it had been refused: %s", addr, msg)
			}
		}
		time.Sleep(time.Second)
	}

	// The kubelet's probes come from the node, which the policies must
	// let through: the pods are still Ready several probe periods later.
	for _, p := range students {
		var live corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), &live); err != nil {
			t.Fatal(err)
		}
		if !podReady(&live) {
			t.Errorf("pod %s is no longer Ready under the policies: %v", p.Name, live.Status.Conditions)
		}
	}

	// The control: without the controller's policies alice reaches bob;
	// with them again she does not. This also times enforcement from the
	// moment a policy is seen to the first refused connection.
	stopController()
	if err := c.DeleteAllOf(ctx, &networkingv1.NetworkPolicy{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	eventually(ctx, t, n, alice, pods["bob"], true)
	t.Logf("TIMING with the controller stopped and its policies deleted, alice reaches bob %s later", time.Since(deleted).Round(10*time.Millisecond))
	startController(t, n)
	seen := policyCovering(ctx, t, n, ns, students[1])
	eventually(ctx, t, n, alice, pods["bob"], false)
	t.Logf("TIMING policy enforcement: the restarted controller's policy was seen, and alice → bob refused %s later", time.Since(seen).Round(10*time.Millisecond))

	// Cluster DNS: CoreDNS pods behind kube-dns, which the controller's
	// default egress rule admits.
	for _, name := range []string{"kubernetes.default", "kubernetes.default.svc.cluster.local"} {
		body, err := get(ctx, n, alice, "/lookup?name="+url.QueryEscape(name))
		if err != nil || !strings.Contains(body, "10.96.0.1") {
			t.Errorf("alice's pod looking up %s: %q, %v (want 10.96.0.1)", name, body, err)
		} else {
			t.Logf("alice's pod resolved %s: %s", name, strings.TrimSpace(body))
		}
	}
}

// kubernetesService is the API server's Service, which kube-proxy
// forwards to the API server on the host.
const kubernetesService = "10.96.0.1:443"

// metadataStandIn serves HTTP on 169.254.169.254:80 on the node itself,
// where a cloud's metadata server answers pods, and returns its address.
func metadataStandIn(t *testing.T, n *realnode.Node) string {
	t.Helper()
	const ip = "169.254.169.254"
	// On the node's loopback device: it goes with the namespace.
	if out, err := exec.Command("ip", "-n", realnode.NetnsName, "addr", "add", ip+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("adding %s in the node's namespace: %v: %s", ip, err, out)
	}
	l, err := n.Listen("tcp", ip+":80")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metadata\n") }), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ip + ":80"
}

// internetStandIn serves HTTP on a public address outside the cluster and
// returns it: 192.0.2.10 (TEST-NET-1, never routed on the Internet, and
// public as far as the policies go) on the host's end of the node's veth,
// where the node's default route leads. Pod traffic leaves the node
// masqueraded as NodeIP, which the host reaches through the veth, so the
// host forwards nothing. The address goes with the veth at teardown.
func internetStandIn(t *testing.T) string {
	t.Helper()
	const ip = "192.0.2.10"
	if out, err := exec.Command("ip", "addr", "add", ip+"/32", "dev", realnode.HostVeth).CombinedOutput(); err != nil {
		t.Fatalf("adding %s to %s: %v: %s", ip, realnode.HostVeth, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "addr", "del", ip+"/32", "dev", realnode.HostVeth).Run() })
	l, err := net.Listen("tcp", ip+":80")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "internet\n") }), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ip + ":80"
}

func readiness() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1,
	}
}

// startController runs the Userland controller until the test ends or
// the returned function stops it, with the RBAC it ships
// (config/rbac/role.yaml) and the gateway flags that match the stand-in
// gateway pod.
func startController(t *testing.T, n *realnode.Node) (stop func()) {
	t.Helper()
	ctx := context.Background()
	if err := n.Cluster.CreateFromFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml")); err != nil {
		t.Fatal(err)
	}
	cfg, err := n.Cluster.ConfigBoundTo(ctx, "userland-controller-under-test", "userland-controller")
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := controller.NewManager(cfg, controller.Options{
		MetricsAddr:      "0",
		ProbeAddr:        "0",
		Workers:          2,
		GatewayURL:       "https://userland.example.edu",
		GatewaySelector:  gatewayLabel + "=" + gatewayName,
		GatewayNamespace: gatewayNamespace,
		RolloutIdleAfter: 10 * time.Minute,
		Registry:         prometheus.NewRegistry(),
		AllowRestart:     true,
	})
	if err != nil {
		t.Fatalf("creating the controller: %v", err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("controller: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// readyPod waits for the one pod matching sel in ns to be Ready.
func readyPod(ctx context.Context, t *testing.T, n *realnode.Node, ns string, sel map[string]string) *corev1.Pod {
	t.Helper()
	var ready *corev1.Pod
	var last string
	deadline := time.Now().Add(3 * time.Minute)
	for ready == nil {
		if err := n.Alive(); err != nil {
			t.Fatal(err)
		}
		var pods corev1.PodList
		if err := n.Cluster.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(sel)); err != nil {
			t.Fatal(err)
		}
		last = fmt.Sprintf("%d pods", len(pods.Items))
		for i := range pods.Items {
			p := &pods.Items[i]
			last += fmt.Sprintf("; %s %s %v", p.Name, p.Status.Phase, p.Status.Conditions)
			if podReady(p) && p.DeletionTimestamp == nil {
				ready = p
			}
		}
		if ready == nil {
			if time.Now().After(deadline) {
				t.Fatalf("no Ready pod for %v in %s after 3 minutes: %s", sel, ns, last)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return ready
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// serviceAddr is the address of the controller's Service for a
// Userland, found by its label rather than its name: its ClusterIP and
// port, or its DNS name when it is headless.
func serviceAddr(ctx context.Context, t *testing.T, n *realnode.Node, ns, userland string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var svcs corev1.ServiceList
		if err := n.Cluster.Client.List(ctx, &svcs, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelUserland: userland}); err != nil {
			t.Fatal(err)
		}
		if len(svcs.Items) == 1 && svcs.Items[0].Spec.ClusterIP != "" && len(svcs.Items[0].Spec.Ports) > 0 {
			s := svcs.Items[0]
			port := strconv.Itoa(int(s.Spec.Ports[0].Port))
			if s.Spec.ClusterIP == corev1.ClusterIPNone {
				// Headless: the name resolves to the pod, through DNS.
				return net.JoinHostPort(s.Name+"."+s.Namespace+".svc.cluster.local", port)
			}
			return net.JoinHostPort(s.Spec.ClusterIP, port)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Service for %s in %s: %d found", userland, ns, len(svcs.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// policyCovering waits until some NetworkPolicy in ns selects pod, and
// says when it was first seen.
func policyCovering(ctx context.Context, t *testing.T, n *realnode.Node, ns string, pod *corev1.Pod) time.Time {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var policies networkingv1.NetworkPolicyList
		if err := n.Cluster.Client.List(ctx, &policies, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, p := range policies.Items {
			sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
			if err == nil && sel.Matches(labels.Set(pod.Labels)) {
				t.Logf("NetworkPolicy %s selects %s (created %s)", p.Name, pod.Name, p.CreationTimestamp.Format(time.RFC3339))
				return time.Now()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller made no NetworkPolicy selecting %s in a minute", pod.Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// get asks the probe server of the pod at podIP for path, from inside
// the node's network namespace.
func get(ctx context.Context, n *realnode.Node, podIP, path string) (string, error) {
	return getFromNode(ctx, n, "http://"+net.JoinHostPort(podIP, "8080")+path)
}

// getFromNode GETs u from inside the node's network namespace; a status
// other than 200 is an error, returned with the body.
func getFromNode(ctx context.Context, n *realnode.Node, u string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := n.HTTPClient(10 * time.Second).Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("%s", resp.Status)
	}
	return string(body), nil
}

// dial asks the pod at from to open a TCP connection to addr; ok reports
// that it did.
func dial(ctx context.Context, n *realnode.Node, from, addr string) (msg string, ok bool) {
	body, err := get(ctx, n, from, "/dial?addr="+url.QueryEscape(addr))
	if err != nil {
		return strings.TrimSpace(body) + " " + err.Error(), false
	}
	return strings.TrimSpace(body), true
}

// eventually waits (up to a minute) until from's connection to addr
// succeeds (want) or fails (!want), and says how long that took.
func eventually(ctx context.Context, t *testing.T, n *realnode.Node, from, addr string, want bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		msg, ok := dial(ctx, n, from, addr)
		// Refused means the probe answered that its connection failed:
		// not that the probe itself could not be asked, nor that a name
		// did not resolve.
		if ok == want && (want || (strings.HasPrefix(msg, "refused") && !strings.Contains(msg, "lookup"))) {
			t.Logf("%s → %s: %s", from, addr, msg)
			return time.Since(start)
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("%s → %s: still %q after a minute (want reached=%v)", from, addr, msg, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
