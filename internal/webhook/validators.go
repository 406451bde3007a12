package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
	"github.com/userland-dev/userland/internal/budget"
	"github.com/userland-dev/userland/internal/idle"
	"github.com/userland-dev/userland/internal/templates"
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

// TemplateValidator enforces the Pod Security Standards level on Templates
// and checks that the requester may use the Secrets and ServiceAccounts a
// Template names (template_refs.go).
type TemplateValidator struct {
	// PodSecurity is the enforced level.
	PodSecurity *PodSecurity
	// Access asks what the requester may do.
	Access access.Reviewer
}

// ValidateCreate checks a new Template.
func (v *TemplateValidator) ValidateCreate(ctx context.Context, t *v1alpha1.Template) (admission.Warnings, error) {
	return nil, v.validate(ctx, nil, t)
}

// ValidateUpdate checks a changed Template; only references it adds are
// asked about (checkTemplateRefs).
func (v *TemplateValidator) ValidateUpdate(ctx context.Context, old, t *v1alpha1.Template) (admission.Warnings, error) {
	return nil, v.validate(ctx, &old.Spec, t)
}

func (v *TemplateValidator) validate(ctx context.Context, old *v1alpha1.TemplateSpec, t *v1alpha1.Template) error {
	spec := field.NewPath("spec")
	errs := ValidateTemplateSpec(v.PodSecurity, &t.Spec, spec)
	refErrs, err := checkTemplateRefs(ctx, v.Access, t.Namespace, old, &t.Spec, spec)
	if err != nil {
		return err
	}
	return invalid("Template", t.Name, append(errs, refErrs...))
}

// ValidateDelete allows every deletion.
func (v *TemplateValidator) ValidateDelete(context.Context, *v1alpha1.Template) (admission.Warnings, error) {
	return nil, nil
}

// +kubebuilder:webhook:path=/validate-userland-dev-v1alpha1-clustertemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=userland.dev,resources=clustertemplates,verbs=create;update,versions=v1alpha1,name=clustertemplates.userland.dev,admissionReviewVersions=v1,timeoutSeconds=5

// ClusterTemplateValidator enforces the Pod Security Standards level on
// ClusterTemplates and checks, cluster-wide, that the requester may use the
// Secrets and ServiceAccounts one names (template_refs.go).
type ClusterTemplateValidator struct {
	// PodSecurity is the enforced level.
	PodSecurity *PodSecurity
	// Access asks what the requester may do.
	Access access.Reviewer
}

// ValidateCreate checks a new ClusterTemplate.
func (v *ClusterTemplateValidator) ValidateCreate(ctx context.Context, t *v1alpha1.ClusterTemplate) (admission.Warnings, error) {
	return nil, v.validate(ctx, nil, t)
}

// ValidateUpdate checks a changed ClusterTemplate; only references it adds
// are asked about (checkTemplateRefs).
func (v *ClusterTemplateValidator) ValidateUpdate(ctx context.Context, old, t *v1alpha1.ClusterTemplate) (admission.Warnings, error) {
	return nil, v.validate(ctx, &old.Spec.TemplateSpec, t)
}

// validate asks about references cluster-wide (namespace ""): a
// ClusterTemplate runs in every namespace it allows.
func (v *ClusterTemplateValidator) validate(ctx context.Context, old *v1alpha1.TemplateSpec, t *v1alpha1.ClusterTemplate) error {
	spec := field.NewPath("spec")
	errs := ValidateTemplateSpec(v.PodSecurity, &t.Spec.TemplateSpec, spec)
	refErrs, err := checkTemplateRefs(ctx, v.Access, "", old, &t.Spec.TemplateSpec, spec)
	if err != nil {
		return err
	}
	return invalid("ClusterTemplate", t.Name, append(errs, refErrs...))
}

// ValidateDelete allows every deletion.
func (v *ClusterTemplateValidator) ValidateDelete(context.Context, *v1alpha1.ClusterTemplate) (admission.Warnings, error) {
	return nil, nil
}

// The API server sends a deletion to the webhook only when ValidateDelete
// could refuse it: the environment has recorded usage, and the deleter is
// neither kube-system (the namespace controller, the garbage collector)
// nor system:masters (whom RBAC allows grant anyway; some clusters run
// their controller-manager so). Every other deletion, a namespace's
// cleanup above all, goes through even while the webhook is down;
// ValidateDelete checks the same again.
// +kubebuilder:webhook:path=/validate-userland-dev-v1alpha1-userland,mutating=false,failurePolicy=fail,sideEffects=None,groups=userland.dev,resources=userlands,verbs=create;update;delete,versions=v1alpha1,name=userlands.userland.dev,admissionReviewVersions=v1,timeoutSeconds=5,patch=`{"matchConditions":[{"name":"deletions-with-usage","expression":"request.operation != 'DELETE' || (has(oldObject.status) && has(oldObject.status.usage))"},{"name":"deletions-not-by-kube-system-or-masters","expression":"request.operation != 'DELETE' || !(request.userInfo.username == 'system:kube-controller-manager' || request.userInfo.username.startsWith('system:serviceaccount:kube-system:') || (has(request.userInfo.groups) && 'system:masters' in request.userInfo.groups))"}]}`
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
	// GrantRecorders may record a grant as another person's
	// (Options.GrantRecorders).
	GrantRecorders []string
}

// ValidateCreate checks a new Userland: its course link (see
// validateCourseLink) and its template reference.
func (v *UserlandValidator) ValidateCreate(ctx context.Context, ul *v1alpha1.Userland) (admission.Warnings, error) {
	if errs, err := v.validateLinks(ctx, nil, ul); err != nil || len(errs) > 0 {
		return nil, errors.Join(err, invalid("Userland", ul.Name, errs))
	}
	return v.validateTemplateRef(ctx, ul)
}

// validateTemplateRef checks the template a Userland names.
func (v *UserlandValidator) validateTemplateRef(ctx context.Context, ul *v1alpha1.Userland) (admission.Warnings, error) {
	ref := ul.Spec.TemplateRef
	refPath := field.NewPath("spec", "templateRef")
	res, err := templates.ResolveRef(ctx, v.Reader, ul.Namespace, ref)
	if err != nil {
		return missingTemplateWarning(err, ref, ul.Namespace)
	}
	allowed, selector, err := allowsNamespace(ctx, v.Reader, res, ul.Namespace)
	if err != nil || allowed {
		return nil, err
	}
	return nil, invalid("Userland", ul.Name, field.ErrorList{field.Forbidden(refPath.Child("name"),
		fmt.Sprintf("ClusterTemplate %q does not allow namespace %q (its allowedNamespaces selector is %s)", res.Name, ul.Namespace, selector))})
}

// allowsNamespace reports whether the resolved template admits namespace
// (a Template always does), and the selector it applied (nil when it
// admits every namespace). The rule lives in package templates: the
// controller applies the same one on every reconcile.
func allowsNamespace(ctx context.Context, r client.Reader, t *templates.Resolved, namespace string) (bool, labels.Selector, error) {
	ok, selector, err := templates.NamespaceAllowed(ctx, r, t.AllowedNamespaces, namespace)
	if err != nil {
		return false, nil, fmt.Errorf("clustertemplate %s: %w", t.Name, err)
	}
	return ok, selector, nil
}

// missingTemplateWarning admits a Userland whose template does not exist
// yet, with a warning; any other error is the webhook's.
func missingTemplateWarning(err error, ref v1alpha1.TemplateReference, namespace string) (admission.Warnings, error) {
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	where := ""
	if ref.Kind.OrDefault() == v1alpha1.TemplateKindTemplate {
		where = " in namespace " + namespace
	}
	return admission.Warnings{fmt.Sprintf("%s %q does not exist%s yet; the Userland stays Pending until it does", ref.Kind.OrDefault(), ref.Name, where)}, nil
}

// ValidateUpdate checks a change of a Userland's course link, and
// re-checks its reference when that changed.
func (v *UserlandValidator) ValidateUpdate(ctx context.Context, old, ul *v1alpha1.Userland) (admission.Warnings, error) {
	if errs, err := v.validateLinks(ctx, old, ul); err != nil || len(errs) > 0 {
		return nil, errors.Join(err, invalid("Userland", ul.Name, errs))
	}
	if old.Spec.TemplateRef == ul.Spec.TemplateRef {
		return nil, nil
	}
	return v.validateTemplateRef(ctx, ul)
}

// validateLinks checks what ties a Userland to who may act on it: its
// course link and its budget grant, each answered by the API server for
// the requester.
func (v *UserlandValidator) validateLinks(ctx context.Context, old, ul *v1alpha1.Userland) (field.ErrorList, error) {
	errs, err := v.validateCourseLink(ctx, old, ul)
	if err != nil {
		return nil, err
	}
	grantErrs, err := v.validateBudgetGrant(ctx, old, ul)
	if err != nil {
		return nil, err
	}
	escapeErrs, err := v.validateBudgetEscapes(ctx, old, ul)
	if err != nil {
		return nil, err
	}
	return append(append(errs, grantErrs...), escapeErrs...), nil
}

// ValidateDelete refuses deleting an environment that has used some of
// its budget in the current period unless the requester may grant on it
// (grantAction): usage lives only in its status, and its course (or the
// gateway's sign-in) makes it again with none used, the data claim kept,
// so the deletion would grant a fresh budget. The controller retiring a
// course's environments may enroll in the course; the namespace's and
// the garbage collector's deletions are kube-system's. Everything else,
// and every environment without usage, is deleted as before.
func (v *UserlandValidator) ValidateDelete(ctx context.Context, ul *v1alpha1.Userland) (admission.Warnings, error) {
	if ul.Status.Usage == nil || budget.Used(ul.Status.Usage, time.Now()) <= 0 {
		return nil, nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, errors.New("the admission request carries no requester")
	}
	if u := req.UserInfo.Username; u == "system:kube-controller-manager" || strings.HasPrefix(u, serviceAccountPrefix+"kube-system:") {
		return nil, nil
	}
	who := access.FromUserInfo(req.UserInfo)
	grant, err := v.grantAction(ctx, ul)
	if err != nil {
		return nil, err
	}
	ok, err := v.mayGrantOrEnroll(ctx, who, ul, grant)
	if err != nil || ok {
		return nil, err
	}
	return nil, apierrors.NewForbidden(v1alpha1.GroupVersion.WithResource("userlands").GroupResource(), ul.Name, fmt.Errorf(
		"it has used compute hours this budget period, and it would be made again with none used: deleting it is granting hours, "+
			"which takes RBAC's verb %q (%s may not %s)", v1alpha1.VerbGrant, who.User, grant))
}
