package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// ownedSameSecond reads a pod's ReplicaSet only when that can decide the
// phase, and returns only pods whose ReplicaSet is the Deployment's. The
// reader is a fake here, to count the reads; whether the real API server's
// answer is read right is TestPodOwnedByItsDeploymentThroughItsReplicaSet.
func TestOwnedSameSecondReadsOnlyWhenItDecides(t *testing.T) {
	t.Parallel()
	t0 := sameSecondT0
	dep := deploymentAt(t0)
	twoReplicas := dep.DeepCopy()
	twoReplicas.Spec.Replicas = ptr.To[int32](2)
	rolled := dep.DeepCopy()
	rolled.Status = appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
	replicaSet, pod := replicaSetOf, podOfReplicaSet
	// Stored times have whole seconds: a pod of the second is stamped t0.
	same, later, earlier := t0, t0.Add(time.Second), t0.Add(-time.Second)
	tests := map[string]struct {
		dep       *appsv1.Deployment
		pods      []corev1.Pod
		want      map[types.UID]bool
		wantReads int
	}{
		"a Ready pod of its second, its ReplicaSet the Deployment's": {dep, []corev1.Pod{pod("p", "mine", "rs1", same, true, "h2")}, map[types.UID]bool{"p": true}, 1},
		"its ReplicaSet another Deployment's (a namesake's)":         {dep, []corev1.Pod{pod("p", "theirs", "rs2", same, true, "h2")}, nil, 1},
		"naming its ReplicaSet by an old UID":                        {dep, []corev1.Pod{pod("p", "mine", "rs-old", same, true, "h2")}, nil, 1},
		"its ReplicaSet gone":                                        {dep, []corev1.Pod{pod("p", "gone", "rs3", same, true, "h2")}, nil, 1},
		"a pod made after the Deployment: its time decides":          {dep, []corev1.Pod{pod("p", "mine", "rs1", later, true, "h2")}, nil, 0},
		"not Ready yet":                     {dep, []corev1.Pod{pod("p", "mine", "rs1", same, false, "h2")}, nil, 0},
		"another pod template's":            {dep, []corev1.Pod{pod("p", "mine", "rs1", same, true, "h1")}, nil, 0},
		"an older pod beside it":            {dep, []corev1.Pod{pod("p", "mine", "rs1", same, true, "h2"), pod("o", "mine", "rs1", earlier, true, "h2")}, nil, 0},
		"the Deployment already rolled out": {rolled, []corev1.Pod{pod("p", "mine", "rs1", same, true, "h2")}, nil, 0},
		"no Deployment":                     {nil, []corev1.Pod{pod("p", "mine", "rs1", same, true, "h2")}, nil, 0},
		"a later pod, not Ready, beside it": {dep, []corev1.Pod{pod("p", "mine", "rs1", same, true, "h2"), pod("l", "mine", "rs1", later, false, "h2")}, map[types.UID]bool{"p": true}, 1},
		"two Ready pods of its second":      {dep, []corev1.Pod{pod("p", "mine", "rs1", same, true, "h2"), pod("q", "mine", "rs1", same, true, "h2")}, nil, 0},
		"two replicas wanted":               {twoReplicas, []corev1.Pod{pod("p", "mine", "rs1", same, true, "h2")}, nil, 0},
		"the read refused":                  {dep, []corev1.Pod{pod("p", "forbidden", "rs9", same, true, "h2")}, nil, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			reads := 0
			reader := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).
				WithObjects(replicaSet("mine", "rs1", "dep"), replicaSet("theirs", "rs2", "other")).
				WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					reads++
					if key.Name == "forbidden" {
						return apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "replicasets"}, key.Name, errors.New("no"))
					}
					return c.Get(ctx, key, obj, opts...)
				}}).Build()
			r := &UserlandReconciler{APIReader: reader}
			got := r.ownedSameSecond(context.Background(), tc.dep, tc.pods)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("owned (-want +got):\n%s", diff)
			}
			if reads != tc.wantReads {
				t.Errorf("%d reads, want %d", reads, tc.wantReads)
			}
		})
	}
}

// The status phase asks ownedSameSecond: a new environment whose one pod,
// made in its Deployment's second, is Ready, and whose ReplicaSet is the
// Deployment's, is Ready before the Deployment's status says so; without
// the ReplicaSet it is Starting.
func TestStatusPhaseReadsTheSameSecondPodsReplicaSet(t *testing.T) {
	t.Parallel()
	dep := deploymentAt(sameSecondT0)
	pod := podOfReplicaSet("p", "alice-rs", "rs1", sameSecondT0, true, "h2")
	rs := replicaSetOf("alice-rs", "rs1", "dep")
	for name, tc := range map[string]struct {
		reader client.Reader
		want   v1alpha1.Phase
	}{
		"its ReplicaSet read":      {fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(rs).Build(), v1alpha1.PhaseReady},
		"its ReplicaSet not found": {fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).Build(), v1alpha1.PhaseStarting},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := &UserlandReconciler{APIReader: tc.reader}
			s := &reconcileState{ul: &v1alpha1.Userland{}, dep: dep, pods: []corev1.Pod{pod}, running: true}
			if _, err := r.reconcileStatus(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			if s.ul.Status.Phase != tc.want {
				t.Errorf("phase %q, want %q", s.ul.Status.Phase, tc.want)
			}
		})
	}
}

// sameSecondT0 is when the tests' Deployment was made; stored times have
// whole seconds, so a pod of that second is stamped the same.
var sameSecondT0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

// deploymentAt is alice's Deployment, UID "dep", made at t0: one replica,
// pod template hash "h2", not yet rolled out.
func deploymentAt(t0 time.Time) *appsv1.Deployment {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "class", Name: "alice", UID: "dep", CreationTimestamp: metav1.NewTime(t0)},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
	dep.Spec.Template.Annotations = map[string]string{AnnotationTemplateHash: "h2"}
	return dep
}

// replicaSetOf is a ReplicaSet controlled by the Deployment of UID owner.
func replicaSetOf(name string, uid, owner types.UID) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "class", Name: name, UID: uid,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "alice", UID: owner, Controller: ptr.To(true)}}}}
}

// podOfReplicaSet is a pod that names the ReplicaSet rs (of UID rsUID) as
// its controller, made at at, Ready or not, running pod template hash.
func podOfReplicaSet(uid types.UID, rs string, rsUID types.UID, at time.Time, ready bool, hash string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "class", Name: string(uid), UID: uid, CreationTimestamp: metav1.NewTime(at),
		Annotations:     map[string]string{AnnotationTemplateHash: hash},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: rsUID, Controller: ptr.To(true)}}}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}
