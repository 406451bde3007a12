package plugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/course"
)

// grantCommand is `kubectl userland grant COURSE STUDENT --hours N`. It
// writes with the caller's own credentials: the webhook admits the grant
// only when RBAC allows them the verb grant on the course, so the plugin
// lends nobody anything.
func (o *options) grantCommand() *cobra.Command {
	var hours int64
	var template string
	cmd := &cobra.Command{
		Use:   "grant COURSE STUDENT --hours N",
		Short: "Grant a student extra compute hours for the current budget period (each of their course environments, or one with --template)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := o.client()
			if err != nil {
				return err
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
				if err := o.grant(ctx, c, crs, &targets[i], hours, by); err != nil {
					return err
				}
				_, _ = fmt.Fprintf(o.io.Out, "userland.userland.dev/%s granted %d more hours\n", targets[i].Name, hours)
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&hours, "hours", 0, "extra hours for the current period (required)")
	cmd.Flags().StringVar(&template, "template", "", "only the environment of this template")
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

// grant adds hours to ul's grant, retrying on a conflict with another
// grant (the patch carries the resourceVersion it read).
func (o *options) grant(ctx context.Context, c client.Client, crs *v1alpha1.Course, ul *v1alpha1.Userland, hours int64, by string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ul), ul); err != nil {
			return err
		}
		patch, err := actions.GrantPatch(ul, crs, nil, hours, by, o.now())
		if err != nil {
			return err
		}
		if err := c.Patch(ctx, ul, patch); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("granting %s: %w", ul.Name, err)
		}
		return nil
	})
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
