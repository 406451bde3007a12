package roster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	t.Parallel()
	dashboardOrder := []string{ColumnUser, ColumnNamespace, ColumnTemplate}
	pluginOrder := []string{ColumnUser, ColumnTemplate, ColumnNamespace}
	tests := map[string]struct {
		input   string
		order   []string
		defNS   string
		want    []Row
		wantErr bool
	}{
		"columns in the default order": {
			input: "alice,cs101,vscode\nbob , cs101 , jupyterlab\n",
			order: dashboardOrder,
			want: []Row{
				{Line: 1, User: "alice", Namespace: "cs101", Template: "vscode"},
				{Line: 2, User: "bob", Namespace: "cs101", Template: "jupyterlab"},
			},
		},
		"a header sets the order": {
			input: "Template,User,Namespace\nvscode,alice,cs101\n",
			order: dashboardOrder,
			want:  []Row{{Line: 2, User: "alice", Namespace: "cs101", Template: "vscode"}},
		},
		"optional namespace takes the default": {
			input: "alice,vscode\nbob,vscode,other\n",
			order: pluginOrder, defNS: "cs101",
			want: []Row{
				{Line: 1, User: "alice", Namespace: "cs101", Template: "vscode"},
				{Line: 2, User: "bob", Namespace: "other", Template: "vscode"},
			},
		},
		"comments and blank lines are skipped": {
			input: "# class list\n\nalice,cs101,vscode\n",
			order: dashboardOrder,
			want:  []Row{{Line: 3, User: "alice", Namespace: "cs101", Template: "vscode"}},
		},
		"too many columns is a row problem, not a failed import": {
			input: "alice,cs101,vscode,extra\nbob,cs101,vscode\n",
			order: dashboardOrder,
			want: []Row{
				{Line: 1, User: "alice", Namespace: "cs101", Template: "vscode", Problem: "4 columns, want at most 3 (user, namespace, template)"},
				{Line: 2, User: "bob", Namespace: "cs101", Template: "vscode"},
			},
		},
		"broken quoting is a row problem": {
			input: "alice,cs101,\"vscode\nbob,cs101,vscode\n",
			order: dashboardOrder,
			want:  []Row{{Line: 1, Problem: "not valid CSV: extraneous or missing \" in quoted-field"}},
		},
		"too many rows": {
			input: strings.Repeat("a,b,c\n", MaxRows+1), order: dashboardOrder, wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.input), tc.order, tc.defNS)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
		})
	}
}
