package devenv

import (
	"context"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/simcluster"
)

// bindOnce runs one round of bindClaims against c, with a node whose
// volumes go under a temporary directory.
func bindOnce(t *testing.T, c client.Client) {
	t.Helper()
	s := &Stack{Client: c, opts: Options{Log: io.Discard},
		node: &realnode.Node{StateDir: t.TempDir(), Cluster: &simcluster.Cluster{Client: c}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one round: the fake client ignores the context, the loop then ends
	s.bindClaims(ctx)
}

func pendingClaim(ns, name string, uid types.UID) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
}

// offeredTo lists the volumes whose claimRef the binder would bind claim
// to: same namespace and name, and no UID or claim's own.
func offeredTo(t *testing.T, c client.Client, claim *corev1.PersistentVolumeClaim) []string {
	t.Helper()
	var pvs corev1.PersistentVolumeList
	if err := c.List(context.Background(), &pvs); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pv := range pvs.Items {
		ref := pv.Spec.ClaimRef
		if ref != nil && ref.Namespace == claim.Namespace && ref.Name == claim.Name && (ref.UID == "" || ref.UID == claim.UID) &&
			pv.Status.Phase != corev1.VolumeReleased {
			names = append(names, pv.Name)
		}
	}
	return names
}

// TestAdversaryRecreatedClaimGetsAVolume: under `userland dev --real-node`
// a claim deleted and made again under the same name (a Userland with
// reclaimPolicy Delete removed and provisioned again: the gateway does
// that at the user's next sign-in, and ClaimName is the same) never gets
// a volume: its first volume is Released (Retain, its claimRef holds the
// old claim's UID), and bindClaims, finding a volume of that name, makes
// none. The environment stays Pending for the rest of the session.
func TestAdversaryRecreatedClaimGetsAVolume(t *testing.T) {
	t.Parallel()
	claim := pendingClaim("cs101", "taro-home", "uid-second")
	released := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: realnode.LocalVolumeName("cs101", "taro-home")},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "cs101", Name: "taro-home", UID: "uid-first"},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased},
	}
	c := fake.NewClientBuilder().WithObjects(claim, released).WithStatusSubresource(claim, released).Build()
	bindOnce(t, c)
	if got := offeredTo(t, c, claim); len(got) != 1 {
		t.Errorf("volumes the recreated claim can bind: %v, want one", got)
	}
}

// TestAdversaryEachClaimItsOwnVolume: claims of different namespaces and
// names each get a volume of their own (one claimRef each), in a
// directory of their own.
func TestAdversaryEachClaimItsOwnVolume(t *testing.T) {
	t.Parallel()
	claims := []*corev1.PersistentVolumeClaim{
		pendingClaim("a-b", "c", "u1"), pendingClaim("a", "b-c", "u2"),
		pendingClaim("a", "b.c", "u3"), pendingClaim("a-b", "c-d", "u4"),
	}
	c := clientWith(claims...)
	bindOnce(t, c)
	var pvs corev1.PersistentVolumeList
	if err := c.List(context.Background(), &pvs); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{}
	for _, pv := range pvs.Items {
		ref := pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name
		if other, ok := dirs[pv.Spec.Local.Path]; ok {
			t.Errorf("claims %s and %s share the directory %s", other, ref, pv.Spec.Local.Path)
		}
		dirs[pv.Spec.Local.Path] = ref
	}
	for _, claim := range claims {
		if diff := cmp.Diff(1, len(offeredTo(t, c, claim))); diff != "" {
			t.Errorf("volumes for %s/%s (-want +got):\n%s", claim.Namespace, claim.Name, diff)
		}
	}
}

// TestAdversaryClaimsALocalVolumeCannotServeStayPending: a volume bound in
// advance to its claim is bound whatever the claim asks (the PV binder
// skips the selector and class checks for it). A claim that asks for a
// copy of a claim or a snapshot (a template's ephemeral volume with a
// dataSource: a course's starter files) or for particular volumes (a
// selector) would get an empty directory instead, silently: it must be
// left to wait, visibly, rather than served wrongly.
func TestAdversaryClaimsALocalVolumeCannotServeStayPending(t *testing.T) {
	t.Parallel()
	copyOf := pendingClaim("cs101", "taro-work", "u1")
	copyOf.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "starter"}
	copyOfSnapshot := pendingClaim("cs101", "taro-lab", "u2")
	group := "snapshot.storage.k8s.io"
	copyOfSnapshot.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "lab-1"}
	selecting := pendingClaim("cs101", "shared", "u3")
	selecting.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"course": "cs101"}}
	block := pendingClaim("cs101", "raw", "u4")
	mode := corev1.PersistentVolumeBlock
	block.Spec.VolumeMode = &mode
	plain := pendingClaim("cs101", "taro-home", "u5")
	c := clientWith(copyOf, copyOfSnapshot, selecting, block, plain)
	bindOnce(t, c)
	var pvs corev1.PersistentVolumeList
	if err := c.List(context.Background(), &pvs); err != nil {
		t.Fatal(err)
	}
	var bound []string
	for _, pv := range pvs.Items {
		bound = append(bound, pv.Spec.ClaimRef.Name)
	}
	if diff := cmp.Diff([]string{"taro-home"}, bound); diff != "" {
		t.Errorf("claims given a local volume (-want +got):\n%s", diff)
	}
}

// clientWith is a fake client holding claims, their status writable.
func clientWith(claims ...*corev1.PersistentVolumeClaim) client.Client {
	b := fake.NewClientBuilder()
	for _, c := range claims {
		b = b.WithObjects(c).WithStatusSubresource(c)
	}
	return b.Build()
}
