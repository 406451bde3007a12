// Package plugin is kubectl-userland: list, create, import, start, stop,
// restart, pending and open, with kubectl's usual flags (k8s.io/cli-runtime)
// and the same names and behaviour as the dashboard.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/actions"
	"github.com/userland-dev/userland/internal/describe"
	"github.com/userland-dev/userland/internal/roster"
	"github.com/userland-dev/userland/internal/userlands"
)

// fieldOwner names the plugin's writes.
const fieldOwner = "kubectl-userland"

// options are shared by every command.
type options struct {
	flags         *genericclioptions.ConfigFlags
	io            genericiooptions.IOStreams
	allNamespaces bool
	now           func() time.Time
	// opener opens a URL in a browser; nil when none is available.
	opener func(url string) error
}

// NewCommand builds `kubectl userland`.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(true), io: streams, now: time.Now, opener: browserOpener()}
	cmd := &cobra.Command{
		Use:           "kubectl-userland",
		Short:         "Manage Userland environments: list, create, import rosters, start, stop, restart, apply updates",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	o.flags.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "across all namespaces")
	cmd.AddCommand(o.listCommand(), o.createCommand(), o.importCommand(), o.pendingCommand(), o.openCommand(), o.courseCommand(), o.grantCommand())
	for _, v := range []actions.Verb{actions.Start, actions.Stop, actions.Restart} {
		cmd.AddCommand(o.actionCommand(v))
	}
	return cmd
}

func (o *options) client() (client.Client, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	// client-go's default of 5 requests/s would make a 500-row roster
	// take minutes; kubectl itself allows 50.
	cfg.QPS, cfg.Burst = 50, 100
	return client.New(cfg, client.Options{Scheme: v1alpha1.NewScheme()})
}

// namespace is -n, else the kubeconfig context's namespace, else default.
func (o *options) namespace() (string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// list returns a client and the Userlands in -n's namespace, or all with -A.
func (o *options) list(ctx context.Context) (client.Client, *v1alpha1.UserlandList, error) {
	c, err := o.client()
	if err != nil {
		return nil, nil, err
	}
	var opts []client.ListOption
	if !o.allNamespaces {
		ns, err := o.namespace()
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, client.InNamespace(ns))
	}
	var list v1alpha1.UserlandList
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, nil, fmt.Errorf("listing userlands: %w", err)
	}
	return c, &list, nil
}

func sortUserlands(items []v1alpha1.Userland) {
	slices.SortFunc(items, func(a, b v1alpha1.Userland) int {
		return strings.Compare(a.Namespace+"\x00"+a.Spec.User+"\x00"+a.Name, b.Namespace+"\x00"+b.Spec.User+"\x00"+b.Name)
	})
}

// lastActivity says when and how the environment was last used, e.g.
// "4m10s ago (WebSocket)", and when an idle stop is near.
func lastActivity(ul *v1alpha1.Userland, now time.Time) string {
	if ul.Status.LastActivityTime == nil {
		return "<none>"
	}
	out := now.Sub(ul.Status.LastActivityTime.Time).Round(time.Second).String() + " ago"
	if src := ul.Status.LastActivitySource; src != "" {
		out += " (" + string(src) + ")"
	}
	if t := ul.Status.IdleStopTime; t != nil && ul.Status.Phase != v1alpha1.PhaseStopped {
		out += ", idle stop in " + t.Sub(now).Round(time.Second).String()
	}
	return out
}

// printList writes Userlands as a table, or JSON/YAML.
func (o *options) printList(list *v1alpha1.UserlandList, output string) error {
	sortUserlands(list.Items)
	switch output {
	case "json", "yaml":
		return o.printStructured(list, "Userland", output)
	case "", "wide":
	default:
		return fmt.Errorf("--output %q: want wide, json or yaml", output)
	}
	w := tabwriter.NewWriter(o.io.Out, 0, 4, 3, ' ', 0)
	header := []string{"NAME", "DISPLAY", "USER", "TEMPLATE", "PHASE", "URL", "LAST USED"}
	if o.allNamespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if output == "wide" {
		header = append(header, "UPDATE PENDING", "SUSPENDED", "AGE")
	}
	_, _ = fmt.Fprintln(w, strings.Join(header, "\t"))
	now := o.now()
	for i := range list.Items {
		ul := &list.Items[i]
		url := ul.Status.URL
		if url == "" {
			url = "<none>"
		}
		display := ul.Status.DisplayName
		if display == "" {
			display = "<pending>" // the controller has not resolved the template yet
		}
		row := []string{ul.Name, display, ul.Spec.User, ul.Spec.TemplateRef.Name, describe.Column(ul), url, lastActivity(ul, now)}
		if o.allNamespaces {
			row = append([]string{ul.Namespace}, row...)
		}
		if output == "wide" {
			row = append(row, fmt.Sprint(ul.Status.UpdatePending), suspendedBy(ul), now.Sub(ul.CreationTimestamp.Time).Round(time.Second).String())
		}
		_, _ = fmt.Fprintln(w, strings.Join(row, "\t"))
	}
	return w.Flush()
}

// printStructured writes a list of kind as JSON or YAML, as kubectl's -o
// does: with kinds set and without managed fields.
func (o *options) printStructured(list client.ObjectList, kind, output string) error {
	list.GetObjectKind().SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind + "List"))
	err := meta.EachListItem(list, func(obj k8sruntime.Object) error {
		obj.GetObjectKind().SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var p printers.ResourcePrinter = &printers.JSONPrinter{}
	if output == "yaml" {
		p = &printers.YAMLPrinter{}
	}
	return p.PrintObj(list, o.io.Out)
}

// suspendedBy is the SUSPENDED column: false, owner (its user stopped it
// and may start it) or staff (only staff may start it; the dashboard says
// so to the user).
func suspendedBy(ul *v1alpha1.Userland) string {
	switch {
	case !ul.Spec.Suspend:
		return "false"
	case actions.SuspendedByStaff(ul):
		return "staff"
	default:
		return "owner"
	}
}

func (o *options) listCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List environments: display name, user, template, phase, URL and last activity",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, list, err := o.list(cmd.Context())
			if err != nil {
				return err
			}
			if len(list.Items) == 0 && output == "" {
				_, _ = fmt.Fprintln(o.io.ErrOut, "No environments found.")
				return nil
			}
			return o.printList(list, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "wide, json or yaml")
	return cmd
}

func (o *options) createCommand() *cobra.Command {
	var template, kind string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "create USER --template TEMPLATE",
		Short: "Create a user's environment, named as the gateway's auto-provisioning would name it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if template == "" {
				return errors.New("--template is required")
			}
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			k := v1alpha1.TemplateKind(kind)
			if k != v1alpha1.TemplateKindTemplate && k != v1alpha1.TemplateKindClusterTemplate {
				return fmt.Errorf("--kind %q: want Template or ClusterTemplate", kind)
			}
			ul := &v1alpha1.Userland{Spec: v1alpha1.UserlandSpec{User: args[0], TemplateRef: v1alpha1.TemplateReference{Kind: k, Name: template}}}
			ul.Namespace = ns
			opts := []client.CreateOption{client.FieldOwner(fieldOwner)}
			if dryRun {
				opts = append(opts, client.DryRunAll)
			}
			name, created, err := userlands.Create(cmd.Context(), c, c, ul, opts...)
			if err != nil {
				return fmt.Errorf("creating the environment of %s: %w", args[0], err)
			}
			if !created {
				return fmt.Errorf("%s already has an environment from %s %s in %s: userland.userland.dev/%s", args[0], k, template, ns, name)
			}
			suffix := ""
			if dryRun {
				suffix = " (server dry run)"
			}
			_, _ = fmt.Fprintf(o.io.Out, "userland.userland.dev/%s created%s\n", name, suffix)
			return nil
		},
	}
	cmd.Flags().StringVar(&template, "template", "", "the template to run")
	cmd.Flags().StringVar(&kind, "kind", string(v1alpha1.TemplateKindTemplate), "Template or ClusterTemplate")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "validate on the server without creating")
	return cmd
}

// errRejected makes the command exit non-zero after printing its report.
var errRejected = errors.New("some rows were rejected")

func (o *options) importCommand() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "import FILE.csv",
		Short: "Create environments from a roster (columns user, template and optional namespace); idempotent",
		Long: `Create an environment for every row of a CSV roster with the columns
user, template and, optionally, namespace (default: -n or the context's).
A header row may name the columns in another order. Rows are reported as
created, already present or rejected with the reason; importing again
creates nothing new. The command fails if any row was rejected.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			in, done, err := o.input(args[0])
			if err != nil {
				return err
			}
			defer done()
			rows, err := roster.Parse(in, []string{roster.ColumnUser, roster.ColumnTemplate, roster.ColumnNamespace}, ns)
			if err != nil {
				return err
			}
			results := roster.Import(cmd.Context(), rows, roster.Options{Reader: c, Writer: c, DryRun: dryRun, FieldOwner: fieldOwner})
			w := tabwriter.NewWriter(o.io.Out, 0, 4, 2, ' ', 0)
			_, _ = fmt.Fprintln(w, "LINE\tUSER\tNAMESPACE\tTEMPLATE\tNAME\tRESULT\tREASON")
			for _, r := range results {
				_, _ = fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Line, r.User, r.Namespace, r.Template, r.Name, r.Outcome, r.Reason)
			}
			_ = w.Flush()
			return o.summarize(results, "created", dryRun)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "validate every row on the server without creating anything")
	return cmd
}

func (o *options) get(ctx context.Context, c client.Client, name string) (*v1alpha1.Userland, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	var ul v1alpha1.Userland
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &ul); err != nil {
		return nil, fmt.Errorf("getting userland %s/%s: %w", ns, name, err)
	}
	return &ul, nil
}

func (o *options) act(ctx context.Context, c client.Client, ul *v1alpha1.Userland, verb actions.Verb) error {
	patch, err := actions.Patch(verb, actions.Staff, ul, o.now())
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, ul, patch, client.FieldOwner(fieldOwner)); err != nil {
		return fmt.Errorf("%s %s/%s: %w", verb, ul.Namespace, ul.Name, err)
	}
	return nil
}

var pastTense = map[actions.Verb]string{actions.Start: "started", actions.Stop: "stopped", actions.Restart: "restarted", actions.Apply: "updated"}

func (o *options) actionCommand(verb actions.Verb) *cobra.Command {
	short := map[actions.Verb]string{
		actions.Start:   "Start a stopped environment (also one stopped for idleness)",
		actions.Stop:    "Stop an environment (it stays stopped until started)",
		actions.Restart: "Restart an environment onto the current template, applying any pending update",
	}[verb]
	return &cobra.Command{
		Use:   string(verb) + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			ul, err := o.get(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			if err := o.act(cmd.Context(), c, ul, verb); err != nil {
				return err
			}
			_, _ = fmt.Fprintf(o.io.Out, "userland.userland.dev/%s %s\n", ul.Name, pastTense[verb])
			return nil
		},
	}
}

func (o *options) pendingCommand() *cobra.Command {
	var apply bool
	cmd := &cobra.Command{
		Use:   "pending",
		Short: "List environments with a template update waiting for its rollout policy; --apply applies them now",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, list, err := o.list(cmd.Context())
			if err != nil {
				return err
			}
			var pending v1alpha1.UserlandList
			for _, ul := range list.Items {
				if ul.Status.UpdatePending {
					pending.Items = append(pending.Items, ul)
				}
			}
			if len(pending.Items) == 0 {
				_, _ = fmt.Fprintln(o.io.ErrOut, "No environments have a pending update.")
				return nil
			}
			if !apply {
				return o.printList(&pending, "")
			}
			var errs []error
			for i := range pending.Items {
				ul := &pending.Items[i]
				if err := o.act(cmd.Context(), c, ul, actions.Apply); err != nil {
					errs = append(errs, err)
					continue
				}
				_, _ = fmt.Fprintf(o.io.Out, "userland.userland.dev/%s updated\n", ul.Name)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&apply, "apply", false, "restart each onto the current template now")
	return cmd
}

func (o *options) openCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "open NAME",
		Short: "Print an environment's URL, and open it in a browser when one is available",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			ul, err := o.get(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			if ul.Status.URL == "" {
				return fmt.Errorf("userland %s has no URL yet (phase %s)", ul.Name, describe.Column(ul))
			}
			_, _ = fmt.Fprintln(o.io.Out, ul.Status.URL)
			if o.opener != nil {
				if err := o.opener(ul.Status.URL); err != nil {
					_, _ = fmt.Fprintf(o.io.ErrOut, "could not open a browser: %v\n", err)
				}
			}
			return nil
		},
	}
}

// browserOpener finds a way to open URLs: `open` on macOS, xdg-open with
// a display elsewhere; nil on a headless machine.
func browserOpener() func(string) error {
	name := "xdg-open"
	switch {
	case runtime.GOOS == "darwin":
		name = "open"
	case os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "":
		return nil
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil
	}
	return func(url string) error { return exec.Command(path, url).Start() }
}

// input opens a roster file, or standard input for "-".
func (o *options) input(name string) (io.Reader, func(), error) {
	if name == "-" {
		return o.io.In, func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { _ = f.Close() }, nil
}

// summarize prints an import's counts (added rows called created) and
// fails when a row was rejected.
func (o *options) summarize(results []roster.Result, created string, dryRun bool) error {
	counts := roster.Count(results)
	suffix := ""
	if dryRun {
		suffix = " (server dry run: nothing was stored)"
	}
	_, _ = fmt.Fprintf(o.io.Out, "%d %s, %d already present, %d rejected%s\n", counts[roster.Created], created, counts[roster.Existing], counts[roster.Rejected], suffix)
	if counts[roster.Rejected] > 0 {
		return fmt.Errorf("%w: %d of %d", errRejected, counts[roster.Rejected], len(results))
	}
	return nil
}
