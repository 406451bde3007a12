package plugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/budgetsource"
	"github.com/userland-dev/userland/internal/course"
)

// grantCommand is `kubectl userland grant COURSE STUDENT --hours N`, or
// `--userland NAME` for one environment (outside a course, its template's
// budget). It writes with the caller's own credentials: the webhook admits
// the grant only when RBAC allows them the verb grant on the course (or
// the Userland), so the plugin lends nobody anything.
func (o *options) grantCommand() *cobra.Command {
	var hours int64
	var template, userland string
	cmd := &cobra.Command{
		Use:   "grant (COURSE STUDENT | --userland NAME) --hours N",
		Short: "Grant extra compute hours for the current budget period: a student's course environments (or one with --template), or one environment with --userland",
		Args: func(cmd *cobra.Command, args []string) error {
			if userland != "" {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := o.client()
			if err != nil {
				return err
			}
			if userland != "" {
				return o.grantOne(ctx, c, userland, hours)
			}
			crs, err := o.getCourse(ctx, c, args[0])
			if err != nil {
				return err
			}
			if crs.Spec.Limits.Budget == nil {
				return fmt.Errorf("course %s has no budget (spec.limits.budget)", crs.Name)
			}
			targets, err := studentEnvironments(ctx, c, crs, args[1], template)
			if err != nil {
				return err
			}
			by := o.whoAmI(ctx, c)
			for i := range targets {
				if err := o.grant(ctx, c, crs, nil, &targets[i], hours, by); err != nil {
					return err
				}
				_, _ = fmt.Fprintf(o.io.Out, "userland.userland.dev/%s granted %d more hours\n", targets[i].Name, hours)
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&hours, "hours", 0, "extra hours for the current period (required)")
	cmd.Flags().StringVar(&template, "template", "", "only the environment of this template")
	cmd.Flags().StringVar(&userland, "userland", "", "one environment by name, in or outside a course (no COURSE STUDENT then)")
	_ = cmd.MarkFlagRequired("hours")
	return cmd
}

// studentEnvironments are the environments course c made for student,
// or the one of template.
func studentEnvironments(ctx context.Context, c client.Client, crs *v1alpha1.Course, student, template string) ([]v1alpha1.Userland, error) {
	var list v1alpha1.UserlandList
	if err := c.List(ctx, &list, client.InNamespace(crs.Namespace), client.MatchingLabels{v1alpha1.LabelCourse: crs.Name}); err != nil {
		return nil, fmt.Errorf("listing the course's environments: %w", err)
	}
	var out []v1alpha1.Userland
	for _, ul := range list.Items {
		if ul.Spec.User == student && course.Provisioned(crs, &ul) && course.RoleOf(crs, &ul) == course.Student &&
			(template == "" || ul.Spec.TemplateRef.Name == template) {
			out = append(out, ul)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("course %s has no environment of student %q", crs.Name, student)
	}
	return out, nil
}

// grantOne grants hours to the Userland name under the budget that
// governs it (budgetsource, as the controller decides): its course's for
// a course's student, else its template's.
func (o *options) grantOne(ctx context.Context, c client.Client, name string, hours int64) error {
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	ul := &v1alpha1.Userland{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ul); err != nil {
		return fmt.Errorf("userland %s: %w", name, err)
	}
	src, err := budgetsource.Of(ctx, c, ul)
	if err != nil {
		return err
	}
	if src.Spec == nil {
		return fmt.Errorf("userland %s: %w", name, actions.ErrNoBudget)
	}
	crs, tmpl := src.Course, src.Template
	if err := o.grant(ctx, c, crs, tmpl, ul, hours, o.whoAmI(ctx, c)); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(o.io.Out, "userland.userland.dev/%s granted %d more hours\n", ul.Name, hours)
	return nil
}

// grant adds hours to ul's grant under crs's budget (or, outside a
// course, tmpl's); actions.Grant retries a conflict with the controller's
// status writes or another grant.
func (o *options) grant(ctx context.Context, c client.Client, crs *v1alpha1.Course, tmpl *v1alpha1.TemplateSpec, ul *v1alpha1.Userland, hours int64, by string) error {
	if err := actions.Grant(ctx, c, c, ul, crs, tmpl, hours, by, o.now()); err != nil {
		return fmt.Errorf("granting %s: %w", ul.Name, err)
	}
	return nil
}

// whoAmI is the caller's user name as the API server sees it, recorded
// with the grant; empty when the server will not say.
func (o *options) whoAmI(ctx context.Context, c client.Client) string {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return ""
	}
	return review.Status.UserInfo.Username
}
