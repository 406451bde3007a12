package realnode

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LocalVolume makes a static local PersistentVolume on the node, bound in
// advance to the claim namespace/claim, in a directory under the state
// directory (the teardown removes it). The node has no provisioner. A
// local volume, not a hostPath one: the kubelet applies a pod's fsGroup to
// local volumes and not to hostPath ones, and fsGroup is what makes a home
// writable for an app's non-root user. size nil means 1Gi. It serves a
// claim not made yet (a test's); ClaimVolume serves one that exists.
func (n *Node) LocalVolume(ctx context.Context, namespace, claim string, size *resource.Quantity) error {
	// Namespaces hold no dots, so the first one splits the name: "a-b"'s
	// claim "c" and "a"'s claim "b-c" must not share a volume.
	return n.localVolume(ctx, LocalVolumeName(namespace, claim),
		corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: namespace, Name: claim}, size)
}

// ClaimVolume is LocalVolume for a claim that exists, bound to that very
// claim (its UID) and named after it (ClaimVolumeName), as a provisioner
// would: a claim deleted and made again under the same name then gets a
// volume of its own, rather than finding its predecessor's, Released and
// bound to the old UID, in the way for good.
func (n *Node) ClaimVolume(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	return n.localVolume(ctx, ClaimVolumeName(pvc),
		corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
		pvc.Spec.Resources.Requests.Storage())
}

// ClaimVolumeName is the name of ClaimVolume's volume for pvc, and of its
// directory: "pvc-" and the claim's UID, as provisioners name them.
func ClaimVolumeName(pvc *corev1.PersistentVolumeClaim) string { return "pvc-" + string(pvc.UID) }

func (n *Node) localVolume(ctx context.Context, name string, claim corev1.ObjectReference, size *resource.Quantity) error {
	dir := n.path("volumes", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	capacity := resource.MustParse("1Gi")
	if size != nil && !size.IsZero() {
		capacity = *size
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: capacity},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &claim,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{NodeName}}},
			}}}},
		},
	}
	if err := n.Cluster.Client.Create(ctx, pv); err != nil {
		return fmt.Errorf("creating the local volume for claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return nil
}

// LocalVolumeName is the name of LocalVolume's volume for a claim, and of
// its directory.
func LocalVolumeName(namespace, claim string) string { return namespace + "." + claim }
