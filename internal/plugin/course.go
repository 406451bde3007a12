package plugin

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
	"github.com/userland-dev/userland/internal/describe"
	"github.com/userland-dev/userland/internal/roster"
)

// courseCommand is `kubectl userland course list|status|import`.
func (o *options) courseCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "course",
		Short: "Courses: list them, show one's students and environments, import a roster",
	}
	cmd.AddCommand(o.courseListCommand(), o.courseStatusCommand(), o.courseImportCommand())
	return cmd
}

func (o *options) courseListCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List courses: term, students enrolled, provisioned, running, ready and queued",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var opts []client.ListOption
			if !o.allNamespaces {
				ns, err := o.namespace()
				if err != nil {
					return err
				}
				opts = append(opts, client.InNamespace(ns))
			}
			var list v1alpha1.CourseList
			if err := c.List(cmd.Context(), &list, opts...); err != nil {
				return fmt.Errorf("listing courses: %w", err)
			}
			slices.SortFunc(list.Items, func(a, b v1alpha1.Course) int {
				return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
			})
			return o.printCourses(&list, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	return cmd
}

func (o *options) printCourses(list *v1alpha1.CourseList, output string) error {
	switch output {
	case "json", "yaml":
		return o.printStructured(list, "Course", output)
	case "":
	default:
		return fmt.Errorf("--output %q: want json or yaml", output)
	}
	if len(list.Items) == 0 {
		_, _ = fmt.Fprintln(o.io.ErrOut, "No courses found.")
		return nil
	}
	w := tabwriter.NewWriter(o.io.Out, 0, 4, 3, ' ', 0)
	header := []string{"NAME", "DISPLAY", "PHASE", "TERM", "ENROLLED", "PROVISIONED", "RUNNING", "READY", "QUEUED"}
	if o.allNamespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	_, _ = fmt.Fprintln(w, strings.Join(header, "\t"))
	now := o.now()
	for i := range list.Items {
		c := &list.Items[i]
		st := c.Status
		row := []string{c.Name, cmp.Or(c.Spec.DisplayName, "<none>"), string(course.PhaseAt(c, now)), term(c),
			fmt.Sprint(st.Enrolled), fmt.Sprint(st.Provisioned), fmt.Sprint(st.Running), fmt.Sprint(st.Ready), fmt.Sprint(st.Queued)}
		if o.allNamespaces {
			row = append([]string{c.Namespace}, row...)
		}
		_, _ = fmt.Fprintln(w, strings.Join(row, "\t"))
	}
	return w.Flush()
}

func term(c *v1alpha1.Course) string {
	return c.Spec.Term.Start.UTC().Format(time.DateOnly) + " – " + c.Spec.Term.End.UTC().Format(time.DateOnly)
}

func (o *options) getCourse(ctx context.Context, c client.Client, name string) (*v1alpha1.Course, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	var out v1alpha1.Course
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &out); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("course %q not found in namespace %s", name, ns)
		}
		return nil, fmt.Errorf("getting course %s: %w", name, err)
	}
	return &out, nil
}

func (o *options) courseStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status COURSE",
		Short: "Show a course's conditions and every student's and staff member's environments",
		Args:  cobra.ExactArgs(1),
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
			var list v1alpha1.UserlandList
			if err := c.List(ctx, &list, client.InNamespace(crs.Namespace), client.MatchingLabels{v1alpha1.LabelCourse: crs.Name}); err != nil {
				return fmt.Errorf("listing the course's environments: %w", err)
			}
			return o.printCourseStatus(crs, list.Items)
		},
	}
}

func (o *options) printCourseStatus(c *v1alpha1.Course, items []v1alpha1.Userland) error {
	now := o.now()
	st := c.Status
	out := o.io.Out
	_, _ = fmt.Fprintf(out, "Course:   %s/%s %s\n", c.Namespace, c.Name, c.Spec.DisplayName)
	_, _ = fmt.Fprintf(out, "Term:     %s (%s)\n", term(c), course.PhaseAt(c, now))
	_, _ = fmt.Fprintf(out, "Students: %d enrolled, %d provisioned, %d running, %d ready, %d queued\n", st.Enrolled, st.Provisioned, st.Running, st.Ready, st.Queued)
	if m := c.Spec.Limits.MaxRunning; m != nil {
		_, _ = fmt.Fprintf(out, "Limit:    %d running at once\n", *m)
	}
	if s := describe.Session(c, now); s != "" {
		_, _ = fmt.Fprintf(out, "Session:  %s\n", s)
	}
	if b := c.Spec.Limits.Budget; b != nil {
		_, _ = fmt.Fprintf(out, "Budget:   %d hours per student per %s (weighting %s)\n", b.Hours, strings.ToLower(string(b.Period)), b.Weighting)
	}
	for _, cond := range st.Conditions {
		_, _ = fmt.Fprintf(out, "%-9s %s (%s): %s\n", cond.Type+":", cond.Status, cond.Reason, cond.Message)
	}
	_, _ = fmt.Fprintln(out)
	sortUserlands(items)
	w := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	_, _ = fmt.Fprintln(w, "USER\tROLE\tNAME\tTEMPLATE\tPHASE\tLAST USED\tCOMPUTE HOURS")
	seen := map[string]bool{}
	sharing := course.NewBudgetSharing(course.Pointers(items), course.OneCourse(c))
	for i := range items {
		ul := &items[i]
		seen[ul.Spec.User] = true
		role := cmp.Or(string(course.RoleOf(c, ul)), "unenrolled")
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ul.Spec.User, role, ul.Name, ul.Spec.TemplateRef.Name, describe.Column(ul), lastActivity(ul, now),
			cmp.Or(describe.Usage(ul.Status.Usage, sharing.Of(ul), now), "-"))
	}
	for _, u := range c.Spec.Students.Users {
		if !seen[u] {
			_, _ = fmt.Fprintf(w, "%s\tstudent\t<none>\t\t\t\n", u)
		}
	}
	return w.Flush()
}

func (o *options) courseImportCommand() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "import COURSE FILE.csv",
		Short: "Add the users of a CSV roster (columns user and optional role: student or staff) to a course; idempotent",
		Long: `Add every row of a CSV roster to the course's students or staff. The
columns are user and, optionally, role (student, the default, or staff); a
header row may name them in another order. Rows are reported as added,
already present or rejected with the reason, and the course is changed
once. The course controller provisions what the course says for the new
students. The command fails if any row was rejected.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := o.client()
			if err != nil {
				return err
			}
			in, done, err := o.input(args[1])
			if err != nil {
				return err
			}
			defer done()
			rows, err := roster.ParseCourse(in)
			if err != nil {
				return err
			}
			var results []roster.Result
			// Re-read and re-merge on a conflict: someone else's roster
			// change in between is kept, not overwritten.
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				crs, err := o.getCourse(ctx, c, args[0])
				if err != nil {
					return err
				}
				before := crs.DeepCopy()
				results = roster.AddToCourse(&crs.Spec, rows)
				if roster.Count(results)[roster.Created] == 0 {
					return nil
				}
				opts := []client.PatchOption{client.FieldOwner(fieldOwner)}
				if dryRun {
					opts = append(opts, client.DryRunAll)
				}
				return c.Patch(ctx, crs, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), opts...)
			})
			if err != nil {
				return fmt.Errorf("updating course %s: %w", args[0], err)
			}
			w := tabwriter.NewWriter(o.io.Out, 0, 4, 2, ' ', 0)
			_, _ = fmt.Fprintln(w, "LINE\tUSER\tROLE\tRESULT\tREASON")
			for _, r := range results {
				outcome := string(r.Outcome)
				if r.Outcome == roster.Created {
					outcome = "added"
				}
				_, _ = fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", r.Line, r.User, r.Role, outcome, r.Reason)
			}
			_ = w.Flush()
			return o.summarize(results, "added", dryRun)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "validate the changed course on the server without storing it")
	return cmd
}
