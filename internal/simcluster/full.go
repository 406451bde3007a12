package simcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// startFull adds kube-controller-manager, kube-scheduler and kwok to a
// running API server, then creates the simulated nodes.
func (c *Cluster) startFull(ctx context.Context, bins string) error {
	kcm, err := StartProcess(c.Dir, "kube-controller-manager", filepath.Join(bins, "kube-controller-manager"), append(c.controllerManagerArgs(),
		"--kubeconfig="+c.KubeconfigPath,
		"--secure-port=0",
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		// kwok renews node leases lazily under load; the default 50s grace
		// lets nodes flap NotReady and their pods lose Ready for good.
		"--node-monitor-grace-period=5m",
		"--kube-api-qps=1000", "--kube-api-burst=2000",
		"--concurrent-deployment-syncs=20",
		"--concurrent-replicaset-syncs=20",
		"--concurrent-service-endpoint-syncs=20",
		"--concurrent-gc-syncs=50",
		"--concurrent-namespace-syncs=20",
		"--v=1",
	)...)
	if err != nil {
		return err
	}
	c.processes = append(c.processes, kcm)

	schedulerConfig := filepath.Join(c.Dir, "kube-scheduler.yaml")
	if err := os.WriteFile(schedulerConfig, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 1000
  burst: 2000
leaderElection:
  leaderElect: false
`, c.KubeconfigPath)), 0o600); err != nil {
		return fmt.Errorf("writing scheduler config: %w", err)
	}
	scheduler, err := StartProcess(c.Dir, "kube-scheduler", filepath.Join(bins, "kube-scheduler"),
		"--config="+schedulerConfig, "--secure-port=0", "--v=1")
	if err != nil {
		return err
	}
	c.processes = append(c.processes, scheduler)

	if c.opts.RealNodes {
		// Real kubelets register their own nodes; the controller-manager
		// being up is all that is left to wait for.
		return c.waitControllerManager(ctx)
	}
	stagesPath, err := c.writeKwokStages(bins)
	if err != nil {
		return err
	}
	kwok, err := StartProcess(c.Dir, "kwok", filepath.Join(bins, "kwok"),
		"--kubeconfig="+c.KubeconfigPath,
		"--config="+stagesPath,
		"--manage-nodes-with-annotation-selector="+KwokNodeAnnotation+"=fake",
		"--node-lease-duration-seconds=40",
		"--cidr=10.244.0.0/16",
		"--node-ip=10.1.0.1",
	)
	if err != nil {
		return err
	}
	c.processes = append(c.processes, kwok)

	if err := c.waitControllerManager(ctx); err != nil {
		return err
	}

	// kwok's default StorageClass provisions and binds claims, as a CSI
	// driver would. It must exist before claims are created so the
	// DefaultStorageClass admission plugin assigns it.
	if err := c.CreateFromFile(ctx, filepath.Join(bins, "kwok-storage-class.yaml")); err != nil {
		return err
	}

	for i := range c.opts.Nodes {
		node := nodeObject(fmt.Sprintf("kwok-node-%d", i))
		if err := c.Client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", node.Name, err)
		}
	}
	// Nodes start with the not-ready taint; the node-lifecycle controller
	// removes it once kwok reports them Ready. Only then can pods schedule.
	return c.waitFor(ctx, "kwok nodes to become Ready and untainted", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		if err := c.Client.List(ctx, &nodes); err != nil {
			return false, err
		}
		ready := 0
		for _, n := range nodes.Items {
			if len(n.Spec.Taints) == 0 && nodeReady(&n) {
				ready++
			}
		}
		return ready >= c.opts.Nodes, nil
	})
}

// waitControllerManager waits until the serviceaccount controller has
// created "default", which shows the controller-manager is up and syncing.
func (c *Cluster) waitControllerManager(ctx context.Context) error {
	return c.waitFor(ctx, "kube-controller-manager", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var sa corev1.ServiceAccount
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &sa)
		return err == nil, client.IgnoreNotFound(err)
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// writeKwokStages writes the stages kwok runs with: the ones kwok ships
// (printed by our kwok build) followed by opts.ExtraStages.
func (c *Cluster) writeKwokStages(bins string) (string, error) {
	out, err := exec.Command(filepath.Join(bins, "kwok"), "userland-stages").Output()
	if err != nil {
		return "", fmt.Errorf("reading kwok's default stages: %w", err)
	}
	volumes, err := os.ReadFile(filepath.Join(bins, "kwok-volume-stages.yaml"))
	if err != nil {
		return "", fmt.Errorf("reading kwok's volume stages (run make control-plane): %w", err)
	}
	docs := append([]string{string(out), strings.TrimSuffix(strings.TrimSpace(string(volumes)), "---")}, c.opts.ExtraStages...)
	path := filepath.Join(c.Dir, "kwok-stages.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")), 0o600); err != nil {
		return "", fmt.Errorf("writing kwok stages: %w", err)
	}
	return path, nil
}
