package webhook

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func pod(mutate func(*corev1.PodSpec)) *corev1.PodTemplateSpec {
	p := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "app", Image: "example.org/app:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}},
		{Name: "db", Image: "example.org/db:1"},
	}}}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

// restrictedPod complies with the restricted level.
func restrictedPod(mutate func(*corev1.PodSpec)) *corev1.PodTemplateSpec {
	return pod(func(s *corev1.PodSpec) {
		s.SecurityContext = &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
		for i := range s.Containers {
			s.Containers[i].SecurityContext = &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}
		}
		if mutate != nil {
			mutate(s)
		}
	})
}

func TestPodSecurityNamesTheFieldAndReason(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		level string
		pod   *corev1.PodTemplateSpec
		// want maps field path → a fragment of the message.
		want map[string]string
	}{
		"compliant with baseline": {"baseline", pod(nil), map[string]string{}},
		"privileged container": {"baseline", pod(func(s *corev1.PodSpec) {
			s.Containers[1].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}), map[string]string{"spec.podTemplate.spec.containers[1].securityContext.privileged": "privileged is not allowed by the baseline Pod Security Standard"}},
		"host network": {"baseline", pod(func(s *corev1.PodSpec) { s.HostNetwork = true }),
			map[string]string{"spec.podTemplate.spec.hostNetwork": "host namespaces"}},
		"host PID": {"baseline", pod(func(s *corev1.PodSpec) { s.HostPID = true }),
			map[string]string{"spec.podTemplate.spec.hostPID": "host namespaces"}},
		"hostPath volume": {"baseline", pod(func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}), map[string]string{"spec.podTemplate.spec.volumes": "hostPath volumes"}},
		"added capability": {"baseline", pod(func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
		}), map[string]string{"spec.podTemplate.spec.containers[0].securityContext.capabilities.add": "non-default capabilities"}},
		"host port": {"baseline", pod(func(s *corev1.PodSpec) { s.Containers[0].Ports[0].HostPort = 80 }),
			map[string]string{"spec.podTemplate.spec.containers[0].ports": "hostPort"}},
		"several violations at once": {"baseline", pod(func(s *corev1.PodSpec) {
			s.HostNetwork = true
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}), map[string]string{
			"spec.podTemplate.spec.hostNetwork":                              "host namespaces",
			"spec.podTemplate.spec.containers[0].securityContext.privileged": "privileged",
		}},
		"baseline pod under restricted": {"restricted", pod(nil), map[string]string{
			"spec.podTemplate.spec.containers[0].securityContext.allowPrivilegeEscalation": "allowPrivilegeEscalation != false",
			"spec.podTemplate.spec.containers[1].securityContext.allowPrivilegeEscalation": "allowPrivilegeEscalation != false",
			"spec.podTemplate.spec.containers[0].securityContext.capabilities":             "unrestricted capabilities",
			"spec.podTemplate.spec.containers[1].securityContext.capabilities":             "unrestricted capabilities",
			"spec.podTemplate.spec.containers[0].securityContext.runAsNonRoot":             "runAsNonRoot != true",
			"spec.podTemplate.spec.containers[1].securityContext.runAsNonRoot":             "runAsNonRoot != true",
			"spec.podTemplate.spec.containers[0].securityContext.seccompProfile":           "seccompProfile",
			"spec.podTemplate.spec.containers[1].securityContext.seccompProfile":           "seccompProfile",
		}},
		"compliant with restricted": {"restricted", restrictedPod(nil), map[string]string{}},
		"running as root under restricted": {"restricted", restrictedPod(func(s *corev1.PodSpec) {
			s.Containers[1].SecurityContext.RunAsUser = ptr.To[int64](0)
		}), map[string]string{"spec.podTemplate.spec.containers[1].securityContext.runAsUser": "runAsUser=0"}},
		"privilege escalation under restricted": {"restricted", restrictedPod(func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
		}), map[string]string{"spec.podTemplate.spec.containers[0].securityContext.allowPrivilegeEscalation": "allowPrivilegeEscalation != false"}},
		"anything goes under privileged": {"privileged", pod(func(s *corev1.PodSpec) {
			s.HostNetwork = true
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}), map[string]string{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps, err := NewPodSecurity(tc.level)
			if err != nil {
				t.Fatal(err)
			}
			errs := ps.Validate(tc.pod, field.NewPath("spec", "podTemplate"))
			got := map[string]string{}
			for _, e := range errs {
				if e.Type != field.ErrorTypeForbidden {
					t.Errorf("%s: type %s, want Forbidden", e.Field, e.Type)
				}
				got[e.Field] = e.Detail
			}
			gotKeys, wantKeys := keys(got), keys(tc.want)
			if diff := cmp.Diff(wantKeys, gotKeys); diff != "" {
				t.Fatalf("fields (-want +got):\n%s\nerrors: %v", diff, errs)
			}
			for f, fragment := range tc.want {
				if !strings.Contains(got[f], fragment) {
					t.Errorf("%s: %q does not mention %q", f, got[f], fragment)
				}
			}
		})
	}
}

func keys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

func TestUnknownLevelIsRejected(t *testing.T) {
	t.Parallel()
	if _, err := NewPodSecurity("strict"); err == nil || !strings.Contains(err.Error(), "privileged, baseline or restricted") {
		t.Fatalf("got %v, want an error listing the levels", err)
	}
}
