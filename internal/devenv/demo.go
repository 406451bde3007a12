package devenv

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/userlands"
)

// DemoUser is a static user dev mode creates.
type DemoUser struct {
	Name, Email string
	Groups      []string
	// Role explains the user in the banner.
	Role string
	// Templates get a Userland created up front; the rest of what the
	// user may self-provision appears at first sign-in.
	Templates []string
}

// DemoUsers are the users dev mode signs in.
var DemoUsers = []DemoUser{
	{Name: "alice", Email: "alice@uni.example.ac.jp", Groups: []string{"data-science-2026"}, Role: "student with VS Code and JupyterLab", Templates: []string{"vscode", "jupyterlab"}},
	{Name: "bob", Email: "bob@uni.example.ac.jp", Role: "student with VS Code and phpMyAdmin", Templates: []string{"vscode", "phpmyadmin"}},
	{Name: "carol", Email: "carol@uni.example.ac.jp", Role: "student whose VS Code is created at first sign-in"},
	{Name: "teacher", Email: "teacher@uni.example.ac.jp", Groups: []string{InstructorGroup}, Role: "instructor of namespace " + DemoNamespace + ", course manager there"},
	{Name: "admin", Email: "admin@uni.example.ac.jp", Groups: []string{AdminGroup}, Role: "administrator"},
}

// demo applies the sample templates and the demo users' environments.
func (s *Stack) demo(ctx context.Context) error {
	for _, f := range []string{"samples/template-vscode.yaml", "samples/template-jupyterlab.yaml", "samples/template-phpmyadmin.yaml", "samples/clustertemplate-vscode.yaml"} {
		objs, err := objectsIn(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if o.GetKind() == "Template" {
				o.SetNamespace(DemoNamespace)
			}
			if s.opts.RealNode != nil {
				if err := overrideImages(o, s.opts.RealNode.ImageOverrides); err != nil {
					return err
				}
			}
			if err := s.apply(ctx, o); err != nil {
				return err
			}
		}
	}
	for _, u := range DemoUsers {
		for _, t := range u.Templates {
			// Found by user and template, as auto-provisioning finds
			// it: a restart (or an upgrade that changed the naming
			// rule) applies to the existing one, never a second.
			ref := v1alpha1.TemplateReference{Kind: v1alpha1.TemplateKindTemplate, Name: t}
			name, _, err := userlands.Name(ctx, s.Client, DemoNamespace, u.Name, ref)
			if err != nil {
				return err
			}
			ul := &v1alpha1.Userland{
				ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: name},
				Spec:       v1alpha1.UserlandSpec{User: u.Name, TemplateRef: ref},
			}
			ul.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Userland"))
			obj, err := toUnstructured(ul)
			if err != nil {
				return err
			}
			if err := s.apply(ctx, obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// Banner is what `userland dev` prints once up.
func (s *Stack) Banner() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nUserland is running.\n\n  Dashboard:  %s\n  Kubeconfig: %s\n              (KUBECONFIG=%s kubectl get userlands -A)\n\n", s.URL, s.KubeconfigPath, s.KubeconfigPath)
	fmt.Fprintf(&b, "  Sign in as (password %q for everyone):\n", DemoPassword)
	for _, u := range DemoUsers {
		fmt.Fprintf(&b, "    %-8s %s\n", u.Name, u.Role)
	}
	if s.node != nil {
		fmt.Fprintf(&b, "\n  Pods run on a real node (kubelet, containerd) in network namespace %s;\n  its files are under %s. Nothing of it is kept between runs.\n", realnode.NetnsName, s.node.StateDir)
	}
	if s.Simulated {
		b.WriteString("\n  Pods run on simulated (kwok) nodes: every environment opens a built-in demo app\n  showing whose it is, the identity headers it received and a WebSocket echo.\n")
	}
	b.WriteString("\nCtrl-C stops everything; state is kept in " + s.opts.StateDir + " (--reset wipes it).\n")
	return b.String()
}

// DemoApps are the simulated environments' apps (nil on a real cluster).
func (s *Stack) DemoApps() *DemoApps {
	if !s.Simulated {
		return nil
	}
	return s.apps
}
