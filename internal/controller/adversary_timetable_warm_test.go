package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

// TestAdversaryTimetableDecideWarmOthers: environments the running limit
// counts but the warm-up may not start (another course's of the same
// name, its user a student of this one) take places under maxRunning and
// are never warmed, nor part of the share.
func TestAdversaryTimetableDecideWarmOthers(t *testing.T) {
	cases := map[string]struct {
		envs       []warmEnv
		percent    int32
		maxRunning *int32
		want       []string
	}{
		"a running other fills the limit": {
			envs:    []warmEnv{{name: "old", other: true, running: true}, {name: "b"}},
			percent: 100, maxRunning: ptr.To[int32](1),
		},
		"a queued other holds its place": {
			envs:    []warmEnv{{name: "old", other: true, queued: true}, {name: "b"}, {name: "c"}},
			percent: 100, maxRunning: ptr.To[int32](2), want: []string{"b"},
		},
		"a stopped other is not warmed": {
			envs:    []warmEnv{{name: "old", other: true}, {name: "b"}},
			percent: 100, want: []string{"b"},
		},
		"others are not in the share": {
			envs:    []warmEnv{{name: "o1", other: true, running: true}, {name: "o2", other: true, running: true}, {name: "b"}, {name: "c"}},
			percent: 50, want: []string{"b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, decideWarm(tc.envs, tc.percent, tc.maxRunning)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
