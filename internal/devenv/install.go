package devenv

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/userland-dev/userland/config"
	"github.com/userland-dev/userland/internal/gateway/authz"
)

// writeEmbedded copies one embedded manifest folder to disk.
func writeEmbedded(dir, to string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	entries, err := fs.ReadDir(config.Manifests, dir)
	if err != nil {
		return fmt.Errorf("reading embedded %s: %w", dir, err)
	}
	for _, e := range entries {
		data, err := fs.ReadFile(config.Manifests, path.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// objectsIn parses an embedded multi-document YAML file.
func objectsIn(file string) ([]*unstructured.Unstructured, error) {
	data, err := fs.ReadFile(config.Manifests, file)
	if err != nil {
		return nil, fmt.Errorf("reading embedded %s: %w", file, err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split("\n"+string(data), "\n---") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", file, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
	return out, nil
}

// apply server-side applies obj as dev mode's field owner.
func (s *Stack) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	//nolint:staticcheck // Patch with client.Apply works with unstructured objects.
	if err := s.Client.Patch(ctx, obj, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// install applies CRDs (existing clusters), RBAC and namespaces.
func (s *Stack) install(ctx context.Context) error {
	var files []string
	if s.opts.Kubeconfig != "" {
		// A cluster dev mode starts gets its CRDs at start.
		entries, err := fs.ReadDir(config.Manifests, "crd/bases")
		if err != nil {
			return err
		}
		for _, e := range entries {
			files = append(files, "crd/bases/"+e.Name())
		}
	}
	files = append(files, "rbac/role.yaml", "rbac/roles.yaml")
	for _, f := range files {
		objs, err := objectsIn(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := s.apply(ctx, o); err != nil {
				return err
			}
		}
	}
	if s.opts.Kubeconfig != "" {
		if err := waitForCRDs(ctx, s.Client); err != nil {
			return err
		}
	}
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}},
		{ObjectMeta: metav1.ObjectMeta{Name: DemoNamespace, Annotations: map[string]string{authz.InstructorGroupsAnnotation: InstructorGroup}}},
	} {
		ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		u, err := toUnstructured(ns)
		if err != nil {
			return err
		}
		if err := s.apply(ctx, u); err != nil {
			return err
		}
	}
	// The chart's placeholder PriorityClass (charts/userland/templates/
	// priorityclass.yaml): a course with schedule.placeholders needs it.
	pc := &schedulingv1.PriorityClass{
		ObjectMeta:       metav1.ObjectMeta{Name: "userland-placeholder"},
		Value:            -10,
		PreemptionPolicy: ptr.To(corev1.PreemptNever),
		Description:      "Userland courses' placeholder pods: they hold room for a session and give way to any pod.",
	}
	pc.SetGroupVersionKind(schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"))
	u, err := toUnstructured(pc)
	if err != nil {
		return err
	}
	if err := s.apply(ctx, u); err != nil {
		return err
	}
	return s.demoBindings(ctx)
}

// demoBindings give the demo's instructors (in DemoNamespace) and admins
// (everywhere) what a real install would bind to them: the course-manager
// and user-manager roles. The gateway asks RBAC before it changes anything
// for a person: a course's roster and whole-course actions need update on
// the course, the roster import create on userlands. Being listed as a
// course's staff, or in an instructor or admin group, shows the pages.
func (s *Stack) demoBindings(ctx context.Context) error {
	group := []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName}}
	var bindings []any
	for _, role := range []string{CourseManagerRole, UserManagerRole} {
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
		teachers := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: InstructorGroup + "-" + role},
			RoleRef:    ref, Subjects: slices.Clone(group),
		}
		teachers.Subjects[0].Name = InstructorGroup
		teachers.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBinding"))
		admins := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: AdminGroup + "-" + role},
			RoleRef:    ref, Subjects: slices.Clone(group),
		}
		admins.Subjects[0].Name = AdminGroup
		admins.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"))
		bindings = append(bindings, teachers, admins)
	}
	for _, b := range bindings {
		u, err := toUnstructured(b)
		if err != nil {
			return err
		}
		if err := s.apply(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

func waitForCRDs(ctx context.Context, c client.Client) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, types.NamespacedName{Name: "userlands.userland.dev"}, &crd); err != nil {
			return false, nil
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	data, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}

// installWebhooks applies the generated configuration pointed at this
// process; the controller injects its CA.
func (s *Stack) installWebhooks(ctx context.Context, port int) error {
	data, err := fs.ReadFile(config.Manifests, "webhook/manifests.yaml")
	if err != nil {
		return err
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("parsing the webhook configuration: %w", err)
	}
	cfg.Name = WebhookConfigName
	cfg.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"))
	for i := range cfg.Webhooks {
		p := *cfg.Webhooks[i].ClientConfig.Service.Path
		cfg.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{
			URL: ptr.To(fmt.Sprintf("https://localhost:%d%s", port, p)),
		}
	}
	u, err := toUnstructured(&cfg)
	if err != nil {
		return err
	}
	return s.apply(ctx, u)
}
