package devenv

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/internal/realnode"
)

// startRealNode brings up the control plane with one real node
// (`userland dev --real-node`). The node keeps nothing between runs: it
// lives under realnode.DefaultStateDir, which every start tears down
// first, so a crashed run leaves nothing that the next one trips on.
func (s *Stack) startRealNode(ctx context.Context, controlPlaneDir, crdDir string) error {
	if err := realnode.Supported(); err != nil {
		return fmt.Errorf("--real-node: %w", err)
	}
	s.logf("starting the control plane and a real node (containerd, kubelet, kube-proxy, kube-router's firewall, CoreDNS) in network namespace %s …", realnode.NetnsName)
	node, err := realnode.Start(ctx, realnode.Options{
		NodeBinariesDir:   s.opts.RealNode.NodeBinariesDir,
		ControlPlaneDir:   controlPlaneDir,
		CRDDirectoryPaths: []string{crdDir},
		Images:            s.opts.RealNode.Images,
		Logf:              s.logf,
		LockWait:          s.opts.RealNode.LockWait,
	})
	if err != nil {
		return fmt.Errorf("starting the real node: %w", err)
	}
	s.node, s.env = node, node.Cluster
	return nil
}

// overrideImages replaces a sample template's container images named in
// overrides (public name → local name), so a machine that cannot pull the
// public images runs the local builds; nothing else in the sample changes.
func overrideImages(obj *unstructured.Unstructured, overrides map[string]string) error {
	if len(overrides) == 0 {
		return nil
	}
	for _, field := range []string{"containers", "initContainers"} {
		path := []string{"spec", "podTemplate", "spec", field}
		containers, found, err := unstructured.NestedSlice(obj.Object, path...)
		if err != nil {
			return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		if !found {
			continue
		}
		for i, c := range containers {
			container, ok := c.(map[string]any)
			if !ok {
				continue
			}
			if image, _ := container["image"].(string); overrides[image] != "" {
				container["image"] = overrides[image]
				containers[i] = container
			}
		}
		if err := unstructured.SetNestedSlice(obj.Object, containers, path...); err != nil {
			return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// bindClaims gives every claim still waiting for a volume a static local
// one on the real node, until ctx ends: the node has no provisioner, and
// the samples' homes are claims. It is dev mode's stand-in for a
// provisioner (docs/development/written-by-hand.md), polling because a
// dev stack holds a handful of claims.
func (s *Stack) bindClaims(ctx context.Context) {
	ticker := time.NewTicker(2 * time.Second)
	defer ticker.Stop()
	told := map[types.UID]bool{}
	for {
		var claims corev1.PersistentVolumeClaimList
		if err := s.Client.List(ctx, &claims); err == nil {
			for i := range claims.Items {
				pvc := &claims.Items[i]
				if pvc.Spec.VolumeName != "" || pvc.Status.Phase != corev1.ClaimPending || pvc.DeletionTimestamp != nil {
					continue
				}
				if why := unservable(pvc); why != "" {
					if !told[pvc.UID] {
						told[pvc.UID] = true
						s.logf("claim %s/%s gets no local volume: it %s, which an empty directory is not; it stays Pending", pvc.Namespace, pvc.Name, why)
					}
					continue
				}
				// One volume per claim object: a claim made again under
				// the same name gets a new one (ClaimVolume).
				var pv corev1.PersistentVolume
				if err := s.Client.Get(ctx, client.ObjectKey{Name: realnode.ClaimVolumeName(pvc)}, &pv); err == nil {
					continue // made already; the binder will bind it
				}
				if err := s.node.ClaimVolume(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
					s.logf("binding claim %s/%s: %v", pvc.Namespace, pvc.Name, err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// unservable says why a static local volume cannot serve pvc, or "". Such
// a volume is bound in advance to its claim, and the binder then checks
// neither the claim's selector nor its class: a claim asking for a copy
// or for particular volumes would get an empty directory, silently.
func unservable(pvc *corev1.PersistentVolumeClaim) string {
	switch {
	case pvc.Spec.DataSource != nil || pvc.Spec.DataSourceRef != nil:
		return "asks for a copy of a claim or a snapshot"
	case pvc.Spec.Selector != nil:
		return "selects particular volumes"
	case pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock:
		return "asks for a block device"
	}
	return ""
}
