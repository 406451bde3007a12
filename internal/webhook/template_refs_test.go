package webhook

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// TestPodRefs: every place a pod template names a Secret, a
// ServiceAccount, a claim or a snapshot is found, with the path kubectl shows, in init and
// regular containers alike; "default" and empty names are not.
func TestPodRefs(t *testing.T) {
	t.Parallel()
	secretEnv := func(name string) corev1.EnvVar {
		return corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}}
	}
	tests := map[string]struct {
		spec corev1.PodSpec
		want []string // "path verb resource name"
	}{
		"nothing named": {
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}},
		},
		"default service account needs nothing": {
			spec: corev1.PodSpec{ServiceAccountName: "default", DeprecatedServiceAccount: "default"},
		},
		"service accounts, both fields": {
			spec: corev1.PodSpec{ServiceAccountName: "builder", DeprecatedServiceAccount: "legacy"},
			want: []string{
				"spec.podTemplate.spec.serviceAccountName use serviceaccounts builder",
				"spec.podTemplate.spec.serviceAccount use serviceaccounts legacy",
			},
		},
		"image pull secrets": {
			spec: corev1.PodSpec{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}, {Name: ""}}},
			want: []string{"spec.podTemplate.spec.imagePullSecrets[0].name get secrets registry"},
		},
		"volumes": {
			spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}},
				{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-pass"}}},
				{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "tls"}}},
				}}}},
				{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "csi-creds"}}}},
				{Name: "azure", VolumeSource: corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{SecretName: "azure-creds", ShareName: "s"}}},
				{Name: "home", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "alice-home"}}},
				{Name: "clone", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
					Spec: corev1.PersistentVolumeClaimSpec{
						DataSource:    &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "bob-home"},
						DataSourceRef: &corev1.TypedObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "final"},
					}}}}},
			}},
			want: []string{
				"spec.podTemplate.spec.volumes[2].secret.secretName get secrets db-pass",
				"spec.podTemplate.spec.volumes[3].projected.sources[1].secret.name get secrets tls",
				"spec.podTemplate.spec.volumes[4].csi.nodePublishSecretRef.name get secrets csi-creds",
				"spec.podTemplate.spec.volumes[5].azureFile.secretName get secrets azure-creds",
				"spec.podTemplate.spec.volumes[6].persistentVolumeClaim.claimName get persistentvolumeclaims alice-home",
				"spec.podTemplate.spec.volumes[7].ephemeral.volumeClaimTemplate.spec.dataSource.name get persistentvolumeclaims bob-home",
				"spec.podTemplate.spec.volumes[7].ephemeral.volumeClaimTemplate.spec.dataSourceRef.name get volumesnapshots final",
			},
		},
		"containers and init containers": {
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init", Env: []corev1.EnvVar{secretEnv("init-token")}}},
				Containers: []corev1.Container{
					{Name: "web"},
					{Name: "db", Env: []corev1.EnvVar{{Name: "A", Value: "b"}, secretEnv("db-pass")},
						EnvFrom: []corev1.EnvFromSource{
							{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}},
							{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "api-keys"}}},
						}},
				},
			},
			want: []string{
				"spec.podTemplate.spec.initContainers[0].env[0].valueFrom.secretKeyRef.name get secrets init-token",
				"spec.podTemplate.spec.containers[1].env[1].valueFrom.secretKeyRef.name get secrets db-pass",
				"spec.podTemplate.spec.containers[1].envFrom[1].secretRef.name get secrets api-keys",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, r := range podRefs(&tc.spec, field.NewPath("spec", "podTemplate", "spec"), "demo") {
				if r.action.Namespace != "demo" {
					t.Errorf("%s asks in namespace %q, want demo", r.path, r.action.Namespace)
				}
				got = append(got, r.path.String()+" "+r.action.Verb+" "+r.action.Resource+" "+r.action.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("refs (-want +got):\n%s", diff)
			}
		})
	}
}
