//go:build realnode

package realnode_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/testobj"
)

// The release as the README installs it.
const (
	releaseNamespace = "userland-system"
	// The chart's names for release "userland" (its fullname is the
	// release name, which contains the chart's).
	controllerDeployment = "userland-controller"
	gatewayDeployment    = "userland-gateway"
	gatewayService       = "userland-gateway"
	webhookConfig        = "userland"
	webhookSecret        = "userland-webhook-cert"
	// The static user the test signs in as, and the password its
	// users.yaml hashes.
	chartUser     = "alice"
	chartPassword = "userland-real-node"
)

// TestChartOnRealNode installs charts/userland with the real helm binary
// onto the real node, running the README's install commands ("Install it
// on a cluster") with kubectl and helm, and the project's own image
// imported into the node's containerd. It proves that the controller and
// the gateway run as pods with their ServiceAccounts' tokens; that the
// controller's validating webhook serves through its Service with the
// certificate the controller generates (a bad Template is refused with
// the field and the reason, a good one admitted); and that the in-cluster
// gateway signs a user in and reaches their environment by its Service's
// DNS name; and that a course's placeholder and image puller run on the
// node (roomBeforeClass), the puller pulls an image from a registry
// before class (pullerPulls), and an environment preempts a placeholder
// (placeholderPreempted).
func TestChartOnRealNode(t *testing.T) {
	// The node reaches no public registry: placeholders and the pullers' main
	// container run the node's own pause image.
	r := installChart(t, nil, "controller.pauseImage=userland.local/pause:1")
	n, installed := r.n, r.installed
	ctx, cancel := context.WithTimeout(context.Background(), 13*time.Minute)
	defer cancel()
	c := n.Cluster.Client

	// The controller and the gateway, as pods of the local image.
	for _, name := range []string{controllerDeployment, gatewayDeployment} {
		d := availableDeployment(ctx, t, n, releaseNamespace, name)
		pods := deploymentPods(ctx, t, n, d)
		for _, p := range pods {
			if img := p.Spec.Containers[0].Image; img != r.image {
				t.Errorf("pod %s runs %s, want the local image %s", p.Name, img, r.image)
			}
			if p.Spec.ServiceAccountName != name {
				t.Errorf("pod %s runs as ServiceAccount %q, want %q", p.Name, p.Spec.ServiceAccountName, name)
			}
			if !projectsToken(p) {
				t.Errorf("pod %s has no projected ServiceAccount token volume: %v", p.Name, p.Spec.Volumes)
			}
			t.Logf("TIMING pod %s Ready %s after it was created (%s after the install commands began)", p.Name,
				readySince(p).Sub(p.CreationTimestamp.Time).Round(time.Second), readySince(p).Sub(installed).Round(time.Second))
		}
	}

	// The controller's pods reach the API server as their ServiceAccount
	// (through the kubernetes Service): one of them holds the leader
	// Lease, and they wrote the webhook's certificate (below).
	leader := leaseHolder(ctx, t, n, releaseNamespace, controller.LeaderElectionID)
	t.Logf("the controller's leader is %s", leader)

	const ns = "class"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	webhookServes(ctx, t, n, ns, installed)
	gatewayReachesEnvironment(ctx, t, n, ns)
	roomBeforeClass(ctx, t, n, ns)
	pullerPulls(ctx, t, n, ns)
	placeholderPreempted(ctx, t, n, ns)
}

// webhookServes checks the validating webhook through its Service: the
// API server calls it at the Service's ClusterIP, checking the
// certificate the controller generated against the CA it injected.
func webhookServes(ctx context.Context, t *testing.T, n *realnode.Node, ns string, installed time.Time) {
	t.Helper()
	c := n.Cluster.Client
	bad := testobj.MakeTemplate(ns, "privileged").Image(probeImage).Obj()
	bad.Spec.PodTemplate.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	bad.Spec.PodTemplate.Spec.HostNetwork = true
	var err error
	deadline := time.Now().Add(3 * time.Minute)
	for {
		// failurePolicy Fail: until the webhook serves, every create fails
		// with "failed calling webhook"; a refusal names the fields.
		err = c.Create(ctx, bad.DeepCopy())
		if err == nil {
			t.Fatal("a privileged Template with host networking was admitted; the webhook should refuse it")
		}
		if apierrors.IsInvalid(err) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("TIMING the webhook first answered %s after the install commands began", time.Since(installed).Round(time.Second))
	t.Logf("the webhook's refusal: %v", err)
	if !strings.Contains(err.Error(), `admission webhook "templates.userland.dev" denied the request`) {
		t.Errorf("the refusal did not come from the Template webhook: %v", err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		t.Fatalf("the refusal has no field causes: %v", err)
	}
	want := map[string]string{
		"spec.podTemplate.spec.hostNetwork":                              "host namespaces is not allowed by the baseline",
		"spec.podTemplate.spec.containers[0].securityContext.privileged": "privileged is not allowed by the baseline",
	}
	got := map[string]string{}
	for _, cause := range status.Status().Details.Causes {
		got[cause.Field] = cause.Message
	}
	for f, msg := range want {
		if !strings.Contains(got[f], msg) {
			t.Errorf("cause for %s = %q, want one containing %q (all: %v)", f, got[f], msg, got)
		}
	}

	// The certificate it served is the one the controller generated into
	// the chart's (empty) Secret, and the API server trusted it through
	// the CA the controller injected.
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: webhookSecret}, &secret); err != nil {
		t.Fatal(err)
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := c.Get(ctx, client.ObjectKey{Name: webhookConfig}, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(secret.Data["tls.crt"]) == 0 || len(secret.Data["ca.crt"]) == 0 {
		t.Errorf("the webhook Secret holds no certificate: keys %v", keys(secret.Data))
	}
	for _, w := range cfg.Webhooks {
		if string(w.ClientConfig.CABundle) != string(secret.Data["ca.crt"]) {
			t.Errorf("webhook %s's caBundle is not the Secret's CA", w.Name)
		}
		if s := w.ClientConfig.Service; s == nil || s.Namespace != releaseNamespace || s.Name != "userland-webhook" {
			t.Errorf("webhook %s is not called through the chart's Service: %+v", w.Name, w.ClientConfig)
		}
	}

	good := testobj.MakeTemplate(ns, "probe").Image(probeImage).Obj()
	good.Spec.PodTemplate.Spec.Containers[0].ReadinessProbe = readiness()
	if err := c.Create(ctx, good); err != nil {
		t.Fatalf("a Template meeting the baseline level was refused: %v", err)
	}

	// The Userland webhook, through the same Service: a Userland naming a
	// ClusterTemplate its namespace may not use is refused, with the
	// field. Only the webhook knows this (the schema cannot look at the
	// ClusterTemplate or the namespace's labels).
	other := testobj.MakeTemplate("", "other-classes").Image(probeImage).Cluster()
	other.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"userland.dev/test-class": "other"}}
	createAdmitted(ctx, t, c, other, "ClusterTemplate "+other.Name, time.Minute)
	refused := testobj.MakeUserland(ns, "not-allowed", chartUser, other.Name).ClusterTemplate().Obj()
	asked := time.Now()
	for {
		err = c.Create(ctx, refused.DeepCopy())
		if err == nil {
			t.Fatalf("a Userland naming ClusterTemplate %s, which does not allow namespace %s, was admitted", other.Name, ns)
		}
		// A replica still starting refuses the call (the known gap
		// createAdmitted names); a refusal is Invalid.
		if apierrors.IsInvalid(err) || time.Since(asked) > time.Minute {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("the Userland webhook's refusal: %v", err)
	if !strings.Contains(err.Error(), `admission webhook "userlands.userland.dev" denied the request`) ||
		!strings.Contains(err.Error(), "spec.templateRef.name") || !strings.Contains(err.Error(), "does not allow namespace") {
		t.Errorf("a Userland naming a ClusterTemplate that does not allow its namespace: got %v, want the Userland webhook's refusal of spec.templateRef.name", err)
	}
}

// gatewayReachesEnvironment signs in to the in-cluster gateway through its
// Service (from the node's network namespace, as an ingress controller on
// the node would reach it) and opens the user's environment, which the
// gateway reaches by the environment Service's DNS name.
func gatewayReachesEnvironment(ctx context.Context, t *testing.T, n *realnode.Node, ns string) {
	t.Helper()
	c := n.Cluster.Client
	created := time.Now()
	ul := testobj.MakeUserland(ns, chartUser, chartUser, "probe").Obj()
	createAdmitted(ctx, t, c, ul, "alice's Userland", time.Minute)
	pod := readyPod(ctx, t, n, ns, map[string]string{v1alpha1.LabelUserland: ul.Name})
	t.Logf("TIMING %s's environment pod Ready %s after the Userland was created", chartUser, time.Since(created).Round(10*time.Millisecond))
	deadline := time.Now().Add(time.Minute)
	for {
		var live v1alpha1.Userland
		if err := c.Get(ctx, client.ObjectKeyFromObject(ul), &live); err != nil {
			t.Fatal(err)
		}
		if live.Status.Phase == v1alpha1.PhaseReady {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Userland %s is %q, not Ready, a minute after its pod: %+v", ul.Name, live.Status.Phase, live.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}

	var svc corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: gatewayService}, &svc); err != nil {
		t.Fatal(err)
	}
	gw := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port))
	hc := &http.Client{
		Timeout:       10 * time.Second,
		Transport:     &http.Transport{DialContext: n.DialContext, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := hc.PostForm(gw+"/login", url.Values{"username": {chartUser}, "password": {chartPassword}, "rd": {"/"}})
	if err != nil {
		t.Fatalf("signing in through the gateway's Service %s: %v", gw, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("signing in as %s: %s, want 303", chartUser, resp.Status)
	}
	// The cookies are Secure (the chart's url is https); the client
	// speaks plain HTTP to the Service, as an ingress that terminated TLS
	// would, so it sends them itself.
	cookies := resp.Cookies()
	envURL := gw + "/u/" + ns + "/" + ul.Name + "/"
	want := "hello from " + pod.Name
	asked := time.Now()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, envURL, nil)
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err.Error()
		} else {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			last = resp.Status + ": " + strings.TrimSpace(string(body))
			if resp.StatusCode == http.StatusOK && strings.TrimSpace(string(body)) == want {
				break
			}
		}
		if time.Since(asked) > time.Minute {
			t.Fatalf("the gateway did not answer %s with %q within a minute; last: %.300s", envURL, want, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("TIMING the in-cluster gateway answered %s with the environment's %q %s after the first request", envURL, want, time.Since(asked).Round(10*time.Millisecond))
}

// availableDeployment waits until every replica of ns/name is available.
func availableDeployment(ctx context.Context, t *testing.T, n *realnode.Node, ns, name string) *appsv1.Deployment {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		if err := n.Alive(); err != nil {
			t.Fatal(err)
		}
		var d appsv1.Deployment
		err := n.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)
		if err == nil && d.Spec.Replicas != nil && d.Status.ObservedGeneration == d.Generation &&
			d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.UpdatedReplicas == *d.Spec.Replicas {
			return &d
		}
		if time.Now().After(deadline) {
			var pods corev1.PodList
			_ = n.Cluster.Client.List(ctx, &pods, client.InNamespace(ns))
			var states []string
			for _, p := range pods.Items {
				states = append(states, fmt.Sprintf("%s %s %v %v", p.Name, p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses))
			}
			t.Fatalf("Deployment %s/%s not available in 4 minutes (%v; status %+v); pods:\n  %s", ns, name, err, d.Status, strings.Join(states, "\n  "))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// deploymentPods are the Ready pods of d.
func deploymentPods(ctx context.Context, t *testing.T, n *realnode.Node, d *appsv1.Deployment) []*corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := n.Cluster.Client.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		t.Fatal(err)
	}
	var ready []*corev1.Pod
	for i := range pods.Items {
		if podReady(&pods.Items[i]) {
			ready = append(ready, &pods.Items[i])
		}
	}
	if len(ready) == 0 {
		t.Fatalf("Deployment %s is available but has no Ready pod", d.Name)
	}
	return ready
}

// readySince is when p last became Ready.
func readySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// projectsToken reports whether p mounts a projected ServiceAccount token
// (what the ServiceAccount admission plugin adds and the kubelet fills).
func projectsToken(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				return true
			}
		}
	}
	return false
}

// leaseHolder waits until the Lease ns/name is held by one of the pods
// in ns, and names it.
func leaseHolder(ctx context.Context, t *testing.T, n *realnode.Node, ns, name string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var lease coordinationv1.Lease
		err := n.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &lease)
		if err == nil && lease.Spec.HolderIdentity != nil {
			// controller-runtime's identity: <pod name>_<uuid>.
			pod, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
			if err := n.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, &corev1.Pod{}); err == nil {
				return pod
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pod in %s holds the Lease %s: %v %+v", ns, name, err, lease.Spec)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
