// Package roster creates Userlands from a class list: a CSV with the
// columns user, namespace and template. The dashboard's import and the
// kubectl plugin's `import` share it, so both name, check and report rows
// the same way. Importing is idempotent: names are derived from user and
// template, and a second run creates nothing.
package roster

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/templates"
	"github.com/userland-dev/userland/internal/userlands"
)

// Column names a roster may use in its header row.
const (
	ColumnUser      = "user"
	ColumnNamespace = "namespace"
	ColumnTemplate  = "template"
)

// MaxRows bounds one import, so an upload cannot tie the server up.
const MaxRows = 5000

// Row is one line of a roster.
type Row struct {
	// Line is the 1-based line number in the file.
	Line                      int
	User, Namespace, Template string
	// Role is a course roster's role column (ParseCourse).
	Role string
	// Problem is set when the line itself is malformed.
	Problem string
}

// Parse reads a roster. A first row naming the columns (user, namespace,
// template, in any order) sets the order; otherwise columns are in order.
// Blank lines and lines starting with # are skipped. A missing namespace
// takes defaultNamespace.
func Parse(r io.Reader, order []string, defaultNamespace string) ([]Row, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	var rows []Row
	first := true
	for {
		record, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			var perr *csv.ParseError
			if errors.As(err, &perr) {
				rows = append(rows, Row{Line: perr.StartLine, Problem: "not valid CSV: " + perr.Err.Error()})
				continue
			}
			return nil, fmt.Errorf("reading roster: %w", err)
		}
		for i := range record {
			record[i] = strings.TrimSpace(record[i])
		}
		if first {
			first = false
			if header := lower(record); slices.Contains(header, ColumnUser) && (slices.Contains(header, ColumnTemplate) || slices.Contains(header, ColumnRole)) {
				order = header
				continue
			}
		}
		if len(rows) >= MaxRows {
			return nil, fmt.Errorf("the roster has more than %d rows; split it", MaxRows)
		}
		row := Row{Line: line, Namespace: defaultNamespace}
		if len(record) > len(order) {
			row.Problem = fmt.Sprintf("%d columns, want at most %d (%s)", len(record), len(order), strings.Join(order, ", "))
		}
		for i, v := range record {
			if i >= len(order) {
				break
			}
			switch order[i] {
			case ColumnUser:
				row.User = v
			case ColumnNamespace:
				if v != "" {
					row.Namespace = v
				}
			case ColumnTemplate:
				row.Template = v
			case ColumnRole:
				row.Role = v
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func lower(record []string) []string {
	out := make([]string, len(record))
	for i, v := range record {
		out[i] = strings.ToLower(v)
	}
	return out
}

// Outcome is what happened to a row.
type Outcome string

// Outcomes of a row.
const (
	Created  Outcome = "created"
	Existing Outcome = "already present"
	Rejected Outcome = "rejected"
)

// Result reports one row.
type Result struct {
	Row
	// Name is the Userland's name, when the row got that far.
	Name    string
	Outcome Outcome
	// Reason says why a row was rejected, or where a duplicate first
	// appeared.
	Reason string
}

// Options configure an import.
type Options struct {
	// Reader checks templates and existing Userlands.
	Reader client.Reader
	// Writer creates Userlands.
	Writer client.Writer
	// MayManage reports whether the importer may create Userlands in a
	// namespace; nil allows all (the API server's RBAC still applies).
	MayManage func(namespace string) bool
	// DryRun asks the API server to validate without storing.
	DryRun bool
	// FieldOwner names the writer ("userland-dashboard", "kubectl-userland").
	FieldOwner string
}

// Import creates a Userland for every good row and reports each row.
func Import(ctx context.Context, rows []Row, opts Options) []Result {
	results := make([]Result, 0, len(rows))
	st := &importState{seen: map[rowKey]int{}, kinds: map[types.NamespacedName]kindLookup{}, indexes: map[string]*userlands.Index{}}
	for _, row := range rows {
		res := Result{Row: row}
		res.Outcome, res.Name, res.Reason = importRow(ctx, row, st, opts)
		results = append(results, res)
	}
	return results
}

// kindLookup remembers a template lookup: a class list names the same few
// templates hundreds of times.
type kindLookup struct {
	kind v1alpha1.TemplateKind
	err  error
}

// rowKey is what makes a row a duplicate of another: one environment per
// user and template in a namespace.
type rowKey struct {
	namespace, user string
	ref             v1alpha1.TemplateReference
}

// importState is what one import remembers between rows.
type importState struct {
	seen    map[rowKey]int
	kinds   map[types.NamespacedName]kindLookup
	indexes map[string]*userlands.Index
}

func importRow(ctx context.Context, row Row, st *importState, opts Options) (Outcome, string, string) {
	switch {
	case row.Problem != "":
		return Rejected, "", row.Problem
	case row.User == "":
		return Rejected, "", "the user is empty"
	case row.Namespace == "":
		return Rejected, "", "the namespace is empty"
	case row.Template == "":
		return Rejected, "", "the template is empty"
	}
	if errs := validation.IsDNS1123Label(row.Namespace); len(errs) > 0 {
		return Rejected, "", fmt.Sprintf("namespace %q is not a valid name: %s", row.Namespace, errs[0])
	}
	if opts.MayManage != nil && !opts.MayManage(row.Namespace) {
		return Rejected, "", fmt.Sprintf("you may not manage namespace %s", row.Namespace)
	}
	tkey := types.NamespacedName{Namespace: row.Namespace, Name: row.Template}
	lookup, ok := st.kinds[tkey]
	if !ok {
		lookup.kind, lookup.err = templateKind(ctx, opts.Reader, row.Namespace, row.Template)
		st.kinds[tkey] = lookup
	}
	kind, err := lookup.kind, lookup.err
	if err != nil {
		return Rejected, "", err.Error()
	}
	ref := v1alpha1.TemplateReference{Kind: kind, Name: row.Template}
	index, ok := st.indexes[row.Namespace]
	if !ok {
		if index, err = userlands.NewIndex(ctx, opts.Reader, row.Namespace); err != nil {
			return Rejected, "", "could not list environments: " + apiMessage(err)
		}
		st.indexes[row.Namespace] = index
	}
	key := rowKey{row.Namespace, row.User, ref}
	if line, dup := st.seen[key]; dup {
		name, _, _ := index.Name(row.User, ref)
		return Existing, name, fmt.Sprintf("same user and template as line %d", line)
	}
	st.seen[key] = row.Line
	ul := &v1alpha1.Userland{
		ObjectMeta: metav1.ObjectMeta{Namespace: row.Namespace},
		Spec:       v1alpha1.UserlandSpec{User: row.User, TemplateRef: ref},
	}
	createOpts := []client.CreateOption{client.FieldOwner(opts.FieldOwner)}
	if opts.DryRun {
		createOpts = append(createOpts, client.DryRunAll)
	}
	name, created, err := index.Create(ctx, opts.Reader, opts.Writer, ul, createOpts...)
	switch {
	case err == nil && created:
		return Created, name, ""
	case err == nil:
		return Existing, name, ""
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
		return Rejected, name, apiMessage(err)
	default:
		return Rejected, name, "could not create it: " + apiMessage(err)
	}
}

// templateKind finds the template a row names: a Template in the row's
// namespace, else a ClusterTemplate.
func templateKind(ctx context.Context, r client.Reader, ns, name string) (v1alpha1.TemplateKind, error) {
	t, err := templates.FindByName(ctx, r, ns, name)
	switch {
	case err == nil:
		return t.Kind, nil
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("template %q not found in namespace %s, nor as a ClusterTemplate", name, ns)
	default:
		return "", fmt.Errorf("could not read template %s: %s", name, apiMessage(err))
	}
}

// apiMessage is the API server's own words, without the request preamble.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

// Count tallies results by outcome.
func Count(results []Result) map[Outcome]int {
	out := map[Outcome]int{}
	for _, r := range results {
		out[r.Outcome]++
	}
	return out
}
