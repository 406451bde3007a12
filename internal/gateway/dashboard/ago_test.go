package dashboard

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAgoSaysWhenInWords(t *testing.T) {
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	tests := []struct {
		name string
		last *time.Time
		want string
	}{
		{"never used", nil, "not yet"},
		{"seconds ago", at(20 * time.Second), "now"},
		{"a clock slightly ahead", at(-2 * time.Second), "now"},
		{"one minute", at(61 * time.Second), "1 minute ago"},
		{"five minutes", at(5*time.Minute + 30*time.Second), "5 minutes ago"},
		{"one hour", at(time.Hour), "1 hour ago"},
		{"a day and a half", at(36 * time.Hour), "36 hours ago"},
		{"last week", at(7 * 24 * time.Hour), "2026-11-17"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ago(now, tt.last)); diff != "" {
				t.Errorf("ago (-want +got):\n%s", diff)
			}
		})
	}
}
