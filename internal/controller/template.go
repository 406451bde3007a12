package controller

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/templates"
)

// IndexTemplateKey indexes Userlands by the template they refer to, so a
// template change finds its Userlands without a full list.
const IndexTemplateKey = "userland.dev/template-key"

// IndexUserlandByTemplate is the indexer function for IndexTemplateKey.
func IndexUserlandByTemplate(obj client.Object) []string {
	ul, ok := obj.(*v1alpha1.Userland)
	if !ok {
		return nil
	}
	return []string{templates.UserlandKey(ul)}
}

// IndexPendingTemplateKey indexes only the Userlands waiting for their
// template's update, by template: a Deployment becoming available frees
// rollout budget for those few, and finding them must not cost a walk over
// every environment of the template on each of the many Deployment events.
const IndexPendingTemplateKey = "userland.dev/pending-template-key"

// IndexPendingUserlandByTemplate is the indexer function for
// IndexPendingTemplateKey.
func IndexPendingUserlandByTemplate(obj client.Object) []string {
	ul, ok := obj.(*v1alpha1.Userland)
	if !ok || !ul.Status.UpdatePending {
		return nil
	}
	return []string{templates.UserlandKey(ul)}
}
