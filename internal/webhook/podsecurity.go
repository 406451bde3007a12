// Package webhook holds Userland's admission webhooks: Pod Security
// Standards for templates, and cross-object checks for Userlands.
package webhook

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// PodSecurity checks pod templates against one Pod Security Standards
// level with the upstream pod-security-admission checks.
type PodSecurity struct {
	level     psapi.LevelVersion
	evaluator policy.Evaluator
}

// NewPodSecurity returns a checker for level: "privileged", "baseline" or
// "restricted".
func NewPodSecurity(level string) (*PodSecurity, error) {
	l, err := psapi.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("pod security level %q: must be privileged, baseline or restricted", level)
	}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return nil, fmt.Errorf("building pod security evaluator: %w", err)
	}
	return &PodSecurity{level: psapi.LevelVersion{Level: l, Version: psapi.LatestVersion()}, evaluator: evaluator}, nil
}

// Level is the enforced level's name.
func (p *PodSecurity) Level() string { return string(p.level.Level) }

// containerFields maps a check's reason to the container field it concerns.
var containerFields = map[string]string{
	"privileged":                        "securityContext.privileged",
	"non-default capabilities":          "securityContext.capabilities.add",
	"unrestricted capabilities":         "securityContext.capabilities",
	"hostPort":                          "ports",
	"allowPrivilegeEscalation != false": "securityContext.allowPrivilegeEscalation",
	"runAsNonRoot != true":              "securityContext.runAsNonRoot",
	"runAsUser=0":                       "securityContext.runAsUser",
	"seccompProfile":                    "securityContext.seccompProfile",
	"procMount":                         "securityContext.procMount",
	"seLinuxOptions":                    "securityContext.seLinuxOptions",
	"forbidden AppArmor profile":        "securityContext.appArmorProfile",
	"forbidden AppArmor profiles":       "securityContext.appArmorProfile",
	"probe or lifecycle host":           "livenessProbe",
	"hostProcess":                       "securityContext.windowsOptions.hostProcess",
}

// podFields maps a check's reason to the pod-level field it concerns.
var podFields = map[string]string{
	"hostPath volumes":            "volumes",
	"restricted volume types":     "volumes",
	"forbidden sysctls":           "securityContext.sysctls",
	"seccompProfile":              "securityContext.seccompProfile",
	"runAsNonRoot != true":        "securityContext.runAsNonRoot",
	"runAsUser=0":                 "securityContext.runAsUser",
	"seLinuxOptions":              "securityContext.seLinuxOptions",
	"forbidden AppArmor profile":  "securityContext.appArmorProfile",
	"forbidden AppArmor profiles": "securityContext.appArmorProfile",
	"hostProcess":                 "securityContext.windowsOptions.hostProcess",
}

// Validate returns every violation of the level in tmpl, each at the field
// that causes it (fldPath is the pod template's path). The upstream checks
// report per pod; a violation is pinned to a container by re-checking the
// pod with that container alone.
func (p *PodSecurity) Validate(tmpl *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	failing := p.failures(&tmpl.ObjectMeta, &tmpl.Spec)
	if len(failing) == 0 {
		return nil
	}
	// What fails with no containers at all is the pod's own doing.
	bare := tmpl.Spec.DeepCopy()
	bare.Containers, bare.InitContainers, bare.EphemeralContainers = nil, nil, nil
	podLevel := p.failures(&tmpl.ObjectMeta, bare)

	spec := fldPath.Child("spec")
	var errs field.ErrorList
	for _, reason := range sortedKeys(podLevel) {
		errs = append(errs, field.Forbidden(podFieldPath(spec, reason, &tmpl.Spec), p.message(reason, podLevel[reason])))
	}
	attributed := map[string]bool{}
	for kind, containers := range map[string][]corev1.Container{"initContainers": tmpl.Spec.InitContainers, "containers": tmpl.Spec.Containers} {
		for i := range containers {
			single := bare.DeepCopy()
			if kind == "containers" {
				single.Containers = []corev1.Container{containers[i]}
			} else {
				single.InitContainers = []corev1.Container{containers[i]}
			}
			own := p.failures(&tmpl.ObjectMeta, single)
			for _, reason := range sortedKeys(own) {
				if _, pod := podLevel[reason]; pod {
					continue
				}
				attributed[reason] = true
				path := spec.Child(kind).Index(i)
				if f, ok := containerFields[reason]; ok {
					path = childPath(path, f)
				}
				errs = append(errs, field.Forbidden(path, p.message(reason, own[reason])))
			}
		}
	}
	// Anything left (a check that only fails across containers) is
	// reported on the pod spec rather than lost.
	for _, reason := range sortedKeys(failing) {
		if _, pod := podLevel[reason]; !pod && !attributed[reason] {
			errs = append(errs, field.Forbidden(spec, p.message(reason, failing[reason])))
		}
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return errs
}

func (p *PodSecurity) message(reason, detail string) string {
	return fmt.Sprintf("%s is not allowed by the %s Pod Security Standard (%s)", reason, p.level.Level, detail)
}

// failures evaluates the level and returns reason → detail of each failed check.
func (p *PodSecurity) failures(meta *metav1.ObjectMeta, spec *corev1.PodSpec) map[string]string {
	out := map[string]string{}
	for _, r := range p.evaluator.EvaluatePod(p.level, meta, spec) {
		if !r.Allowed {
			out[r.ForbiddenReason] = r.ForbiddenDetail
		}
	}
	return out
}

func podFieldPath(spec *field.Path, reason string, pod *corev1.PodSpec) *field.Path {
	if reason == "host namespaces" {
		switch {
		case pod.HostNetwork:
			return spec.Child("hostNetwork")
		case pod.HostPID:
			return spec.Child("hostPID")
		default:
			return spec.Child("hostIPC")
		}
	}
	if f, ok := podFields[reason]; ok {
		return childPath(spec, f)
	}
	return spec
}

func childPath(p *field.Path, dotted string) *field.Path {
	for _, part := range strings.Split(dotted, ".") {
		p = p.Child(part)
	}
	return p
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
