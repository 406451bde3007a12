package budget

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestAdversaryGrantedByFitsStatus: status.usage.grantedBy holds 256
// characters; a longer "by" is refused where it is written (the webhook
// parses it), and a long sign-in name is shortened, whole runes, by the
// dashboard and the plugin.
func TestAdversaryGrantedByFitsStatus(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	if _, err := ParseGrant("2026-11-23T00:00:00Z=1;" + strings.Repeat("g", 257)); err == nil {
		t.Error("a 257-character granter was admitted")
	}
	if _, err := ParseGrant("2026-11-23T00:00:00Z=1;" + strings.Repeat("g", 256)); err != nil {
		t.Errorf("a 256-character granter was refused: %v", err)
	}
	v, err := AddGrant("", start, 1, strings.Repeat("é", 200))
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseGrant(v)
	if err != nil || len(g.By) > MaxGrantedBy || !utf8.ValidString(g.By) {
		t.Errorf("a long name's grant: %q (%v)", g.By, err)
	}
}
