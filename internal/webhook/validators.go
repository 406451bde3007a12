package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
	"github.com/userland-dev/userland/internal/idle"
)

// ValidateTemplateSpec checks what the schema cannot about a template's
// spec: the pod template against the Pod Security Standards level, and
// the idle activity rules' expressions. Template and ClusterTemplate share
// it.
func ValidateTemplateSpec(ps *PodSecurity, spec *v1alpha1.TemplateSpec, fldPath *field.Path) field.ErrorList {
	errs := ps.Validate(&spec.PodTemplate, fldPath.Child("podTemplate"))
	return append(errs, idle.Validate(spec.Idle, fldPath.Child("idle"))...)
}

func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: kind}, name, errs)
}

// +kubebuilder:webhook:path=/validate-userland-dev-v1alpha1-template,mutating=false,failurePolicy=fail,sideEffects=None,groups=userland.dev,resources=templates,verbs=create;update,versions=v1alpha1,name=templates.userland.dev,admissionReviewVersions=v1,timeoutSeconds=5

// TemplateValidator enforces the Pod Security Standards level on Templates.
type TemplateValidator struct {
	// PodSecurity is the enforced level.
	PodSecurity *PodSecurity
	// Access asks what the requester may do.
	Access access.Reviewer
}

// ValidateCreate checks a new Template.
func (v *TemplateValidator) ValidateCreate(_ context.Context, t *v1alpha1.Template) (admission.Warnings, error) {
	return nil, invalid("Template", t.Name, ValidateTemplateSpec(v.PodSecurity, &t.Spec, field.NewPath("spec")))
}

// ValidateUpdate checks a changed Template.
func (v *TemplateValidator) ValidateUpdate(ctx context.Context, _, t *v1alpha1.Template) (admission.Warnings, error) {
	return v.ValidateCreate(ctx, t)
}

// ValidateDelete allows every deletion.
func (v *TemplateValidator) ValidateDelete(context.Context, *v1alpha1.Template) (admission.Warnings, error) {
	return nil, nil
}

// +kubebuilder:webhook:path=/validate-userland-dev-v1alpha1-clustertemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=userland.dev,resources=clustertemplates,verbs=create;update,versions=v1alpha1,name=clustertemplates.userland.dev,admissionReviewVersions=v1,timeoutSeconds=5

// ClusterTemplateValidator enforces the Pod Security Standards level on
// ClusterTemplates.
type ClusterTemplateValidator struct {
	// PodSecurity is the enforced level.
	PodSecurity *PodSecurity
	// Access asks what the requester may do.
	Access access.Reviewer
}

// ValidateCreate checks a new ClusterTemplate.
func (v *ClusterTemplateValidator) ValidateCreate(_ context.Context, t *v1alpha1.ClusterTemplate) (admission.Warnings, error) {
	return nil, invalid("ClusterTemplate", t.Name, ValidateTemplateSpec(v.PodSecurity, &t.Spec.TemplateSpec, field.NewPath("spec")))
}

// ValidateUpdate checks a changed ClusterTemplate.
func (v *ClusterTemplateValidator) ValidateUpdate(ctx context.Context, _, t *v1alpha1.ClusterTemplate) (admission.Warnings, error) {
	return v.ValidateCreate(ctx, t)
}

// ValidateDelete allows every deletion.
func (v *ClusterTemplateValidator) ValidateDelete(context.Context, *v1alpha1.ClusterTemplate) (admission.Warnings, error) {
	return nil, nil
}

// +kubebuilder:webhook:path=/validate-userland-dev-v1alpha1-userland,mutating=false,failurePolicy=fail,sideEffects=None,groups=userland.dev,resources=userlands,verbs=create;update,versions=v1alpha1,name=userlands.userland.dev,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

// UserlandValidator checks a Userland's template reference against other
// objects: a missing template is a warning (GitOps may apply out of order),
// a ClusterTemplate that does not allow the namespace is a denial.
type UserlandValidator struct {
	// Reader reads templates and namespaces straight from the API server:
	// admission is rare and must not act on a stale cache.
	Reader client.Reader
	// Access asks what the requester may do.
	Access access.Reviewer
}

// ValidateCreate checks a new Userland.
func (v *UserlandValidator) ValidateCreate(ctx context.Context, ul *v1alpha1.Userland) (admission.Warnings, error) {
	ref := ul.Spec.TemplateRef
	refPath := field.NewPath("spec", "templateRef")
	if ref.Kind != v1alpha1.TemplateKindClusterTemplate {
		err := v.Reader.Get(ctx, types.NamespacedName{Namespace: ul.Namespace, Name: ref.Name}, &v1alpha1.Template{})
		return missingTemplateWarning(err, "Template", ref.Name, ul.Namespace)
	}
	var ct v1alpha1.ClusterTemplate
	if err := v.Reader.Get(ctx, types.NamespacedName{Name: ref.Name}, &ct); err != nil {
		return missingTemplateWarning(err, "ClusterTemplate", ref.Name, "")
	}
	allowed, selector, err := allowsNamespace(ctx, v.Reader, &ct, ul.Namespace)
	if err != nil || allowed {
		return nil, err
	}
	return nil, invalid("Userland", ul.Name, field.ErrorList{field.Forbidden(refPath.Child("name"),
		fmt.Sprintf("ClusterTemplate %q does not allow namespace %q (its allowedNamespaces selector is %s)", ct.Name, ul.Namespace, selector))})
}

// allowsNamespace reports whether ct's allowedNamespaces admits namespace,
// and the selector it applied (nil when ct admits every namespace).
func allowsNamespace(ctx context.Context, r client.Reader, ct *v1alpha1.ClusterTemplate, namespace string) (bool, labels.Selector, error) {
	if ct.Spec.AllowedNamespaces == nil {
		return true, nil, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(ct.Spec.AllowedNamespaces)
	if err != nil {
		return false, nil, fmt.Errorf("clustertemplate %s has an invalid allowedNamespaces: %w", ct.Name, err)
	}
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: namespace}, &ns); err != nil {
		return false, nil, fmt.Errorf("getting namespace %s: %w", namespace, err)
	}
	return selector.Matches(labels.Set(ns.Labels)), selector, nil
}

func missingTemplateWarning(err error, kind, name, namespace string) (admission.Warnings, error) {
	switch {
	case err == nil:
		return nil, nil
	case apierrors.IsNotFound(err):
		where := ""
		if namespace != "" {
			where = " in namespace " + namespace
		}
		return admission.Warnings{fmt.Sprintf("%s %q does not exist%s yet; the Userland stays Pending until it does", kind, name, where)}, nil
	default:
		return nil, fmt.Errorf("getting %s %s: %w", kind, name, err)
	}
}

// ValidateUpdate re-checks a Userland whose reference changed.
func (v *UserlandValidator) ValidateUpdate(ctx context.Context, old, ul *v1alpha1.Userland) (admission.Warnings, error) {
	if old.Spec.TemplateRef == ul.Spec.TemplateRef {
		return nil, nil
	}
	return v.ValidateCreate(ctx, ul)
}

// ValidateDelete allows every deletion.
func (v *UserlandValidator) ValidateDelete(context.Context, *v1alpha1.Userland) (admission.Warnings, error) {
	return nil, nil
}
