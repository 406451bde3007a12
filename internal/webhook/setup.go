package webhook

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
)

// Setup registers the validating webhooks with the manager's webhook
// server; grantRecorders are Options.GrantRecorders.
func Setup(mgr ctrl.Manager, ps *PodSecurity, grantRecorders []string) error {
	// Every validator asks the API server what the requester may do
	// (SubjectAccessReview) before admitting an object the controller
	// will act on for them.
	reviewer := access.Reviewer{Client: mgr.GetClient()}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.Template{}).WithValidator(&TemplateValidator{PodSecurity: ps, Access: reviewer}).Complete(); err != nil {
		return fmt.Errorf("registering template webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.ClusterTemplate{}).WithValidator(&ClusterTemplateValidator{PodSecurity: ps, Access: reviewer}).Complete(); err != nil {
		return fmt.Errorf("registering clustertemplate webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.Userland{}).WithValidator(&UserlandValidator{Reader: mgr.GetAPIReader(), Access: reviewer, GrantRecorders: grantRecorders}).Complete(); err != nil {
		return fmt.Errorf("registering userland webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.Course{}).WithValidator(&CourseValidator{Reader: mgr.GetAPIReader(), Access: reviewer}).Complete(); err != nil {
		return fmt.Errorf("registering course webhook: %w", err)
	}
	return nil
}
