package simcluster

import (
	"context"
	"fmt"
	"os"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// CreateFromFile creates every object in a multi-document YAML file;
// objects that already exist are left as they are.
func (c *Cluster) CreateFromFile(ctx context.Context, path string) error {
	objs, err := readObjects(path)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := c.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s from %s: %w", obj.GetKind(), obj.GetName(), path, err)
		}
	}
	return nil
}

// readObjects parses every object in a multi-document YAML file.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split("\n"+string(data), "\n---") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", path, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
	return objs, nil
}

// ConfigBoundTo returns a client configuration for user, who is granted
// exactly the ClusterRole clusterRole (cluster-wide) and nothing else. Used
// to prove a component works with the RBAC it ships.
func (c *Cluster) ConfigBoundTo(ctx context.Context, user, clusterRole string) (*rest.Config, error) {
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + clusterRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if err := c.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("binding %s to %s: %w", user, clusterRole, err)
	}
	return c.ConfigFor(user), nil
}

// CertConfigBoundTo is ConfigBoundTo for a user who signs in with a client
// certificate of their own rather than by impersonation. Impersonation makes
// the API server authorise every request twice; benchmarks that compare
// API-server load use this so the component pays what a deployed one does.
func (c *Cluster) CertConfigBoundTo(ctx context.Context, user, clusterRole string) (*rest.Config, error) {
	if _, err := c.ConfigBoundTo(ctx, user, clusterRole); err != nil {
		return nil, err
	}
	cfg, err := c.userConfig(user)
	if err != nil {
		return nil, fmt.Errorf("creating a client certificate for %s: %w", user, err)
	}
	cfg.QPS, cfg.Burst = c.Config.QPS, c.Config.Burst
	return cfg, nil
}

// ConfigFor returns a client configuration that impersonates user.
func (c *Cluster) ConfigFor(user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}
