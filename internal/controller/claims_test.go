package controller_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// A claim named like the Userland's volume but not made by Userland (no
// labels, so no user hash) is someone else's data or a trap: it must not
// be mounted.
func TestForeignClaimIsNotMounted(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	foreign := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "u-home"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	create(t, foreign, template(ns, "t", "example.org/app:1"), userland(ns, "u", "alice", "t"))
	ul := env.WaitPhase(t, ns, "u", v1alpha1.PhaseFailed)
	if c := condition(ul, v1alpha1.ConditionReady); c == nil || c.Reason != "VolumeConflict" {
		t.Fatalf("Ready condition %+v, want reason VolumeConflict", c)
	}
	t.Logf("condition: %s", condition(ul, v1alpha1.ConditionReady).Message)
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "u"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("a deployment mounting the foreign claim was created (err %v)", err)
	}
	var still corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), &still); err != nil || len(still.Labels) != 0 || len(still.OwnerReferences) != 0 {
		t.Errorf("the foreign claim was changed: labels %v owners %v (err %v)", still.Labels, still.OwnerReferences, err)
	}
}

// Pointing a Userland at a template whose volume says Delete must not make
// the claim it kept under Retain deletable.
func TestTemplateRefChangeNeverMakesARetainedClaimDeletable(t *testing.T) {
	t.Parallel()
	sharedController(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	deleting := template(ns, "deleting", "example.org/app:1")
	for i := range deleting.Spec.Volumes {
		deleting.Spec.Volumes[i].ReclaimPolicy = v1alpha1.ReclaimDelete
	}
	create(t, template(ns, "t", "example.org/app:1"), deleting, userland(ns, "u", "alice", "t"))
	env.WaitPhase(t, ns, "u", v1alpha1.PhaseReady)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ul, err := get(t, ctx, ns, "u")
		if err != nil {
			return err
		}
		ul.Spec.TemplateRef.Name = "deleting"
		return env.Client.Update(ctx, ul)
	})
	if err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "the switch to the Delete template is applied", func(ctx context.Context) (bool, error) {
		ul, err := get(t, ctx, ns, "u")
		return err == nil && ul.Status.ObservedGeneration == ul.Generation && ul.Status.Phase == v1alpha1.PhaseReady, err
	})
	var claim corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "u-home"}, &claim); err != nil {
		t.Fatal(err)
	}
	if len(claim.OwnerReferences) != 0 {
		t.Errorf("the retained claim got owners %v: deleting the Userland would now delete the data", claim.OwnerReferences)
	}
}
