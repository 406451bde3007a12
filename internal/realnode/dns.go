package realnode

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/internal/image"
)

// Cluster DNS runs as clusters run it: CoreDNS pods labelled
// k8s-app=kube-dns in kube-system behind the kube-dns Service, so that
// the controller's default DNS egress rule (those pods, port 53) is what
// a test exercises.
const (
	// ClusterDNSIP is the kube-dns Service's address, the kubelet's
	// clusterDNS.
	ClusterDNSIP = "10.96.0.10"
	corednsImage = "userland.local/coredns:1"
	// corednsDir holds the Corefile and CoreDNS's kubeconfig, mounted into
	// its pod (hostPath): CoreDNS signs in as its own user, not with the
	// ServiceAccount token its pod is given.
	corednsDir = "coredns"
)

// corednsArchive packs the cached CoreDNS binary into an OCI archive, once
// per binary (kept beside it in the node's cache). The layer is
// uncompressed: the binary is large and only ever imported locally.
func (n *Node) corednsArchive() (string, error) {
	bin := n.bin("coredns")
	archive := bin + "-image.tar"
	bst, err := os.Stat(bin)
	if err != nil {
		return "", err
	}
	if ast, err := os.Stat(archive); err == nil && ast.ModTime().After(bst.ModTime()) {
		return archive, nil
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "coredns", Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
		return "", err
	}
	if _, err := tw.Write(data); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, static.NewLayer(buf.Bytes(), types.OCIUncompressedLayer)); err != nil {
		return "", err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config = v1.Config{Entrypoint: []string{"/coredns"}}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return "", err
	}
	tmp := archive + ".tmp"
	if err := image.WriteOCIArchive(img, corednsImage, tmp); err != nil {
		return "", fmt.Errorf("packing CoreDNS: %w", err)
	}
	return archive, os.Rename(tmp, archive)
}

// corefile serves the cluster domain from the API server, as CoreDNS's
// own identity. No forward: no upstream DNS is reachable from here.
func corefile(kubeconfig string) string {
	return fmt.Sprintf(`.:53 {
    errors
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s simulated
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
}
`, kubeconfig)
}

// startClusterDNS creates the CoreDNS pod and the kube-dns Service.
func (n *Node) startClusterDNS(ctx context.Context) error {
	mountPath := "/etc/coredns"
	if err := os.WriteFile(n.path(corednsDir, "Corefile"), []byte(corefile(filepath.Join(mountPath, "kubeconfig"))), 0o600); err != nil {
		return err
	}
	labels := map[string]string{"k8s-app": "kube-dns"}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns", Labels: labels},
		Spec: corev1.PodSpec{
			// Its own lookups never go to itself.
			DNSPolicy: corev1.DNSDefault,
			Containers: []corev1.Container{{
				Name:  "coredns",
				Image: corednsImage,
				Args:  []string{"-conf", filepath.Join(mountPath, "Corefile")},
				Ports: []corev1.ContainerPort{
					{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
					{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
				},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}},
					PeriodSeconds: 1,
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: mountPath, ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: n.path(corednsDir)},
			}}},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns", Labels: labels},
		Spec: corev1.ServiceSpec{
			ClusterIP: ClusterDNSIP,
			Selector:  labels,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			},
		},
	}
	// The ServiceAccount admission plugin refuses a pod until its
	// namespace's default ServiceAccount exists.
	if err := n.waitFor(ctx, "kube-system's default ServiceAccount", time.Minute, func(ctx context.Context) (bool, error) {
		err := n.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	if err := n.Cluster.Client.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the kube-dns Service: %w", err)
	}
	if err := n.Cluster.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the CoreDNS pod: %w", err)
	}
	return nil
}
