package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func TestDecideWarm(t *testing.T) {
	at := func(minutes int) time.Time { return time.Date(2026, 12, 1, 9, minutes, 0, 0, time.UTC) }
	roster := func() []warmEnv {
		return []warmEnv{
			{name: "a", lastUsed: at(1)}, {name: "b", lastUsed: at(4)}, {name: "c"}, {name: "d", lastUsed: at(3)}, {name: "e"},
		}
	}
	with := func(f func([]warmEnv)) []warmEnv { envs := roster(); f(envs); return envs }
	cases := map[string]struct {
		envs       []warmEnv
		percent    int32
		maxRunning *int32
		want       []string
	}{
		"all, most recently used first, never used last by name": {envs: roster(), percent: 100,
			want: []string{"b", "d", "a", "c", "e"}},
		"a share, rounded up": {envs: roster(), percent: 50, want: []string{"b", "d", "a"}},
		"the running limit bounds it": {envs: roster(), percent: 100, maxRunning: ptr.To[int32](2),
			want: []string{"b", "d"}},
		"running ones count against the limit and the share": {
			envs: with(func(e []warmEnv) { e[1].running = true }), percent: 100, maxRunning: ptr.To[int32](2),
			want: []string{"d"}},
		"queued ones asked first: they keep their place": {
			envs: with(func(e []warmEnv) { e[0].queued = true }), percent: 100, maxRunning: ptr.To[int32](2),
			want: []string{"b"}},
		"asked since the warm-up began: not asked again, counted in the share": {
			envs: with(func(e []warmEnv) { e[1].asked = true }), percent: 40,
			want: []string{"d"}},
		"asked and starting: counts against the limit before the cache shows it running": {
			envs: with(func(e []warmEnv) { e[1].asked, e[1].starting = true, true }), percent: 100, maxRunning: ptr.To[int32](2),
			want: []string{"d"}},
		"asked but stopped since: holds no place, and is not asked again": {
			envs: with(func(e []warmEnv) { e[1].asked = true }), percent: 100, maxRunning: ptr.To[int32](2),
			want: []string{"d", "a"}},
		"suspended ones are never started": {
			envs: with(func(e []warmEnv) { e[1].suspended = true }), percent: 100, maxRunning: ptr.To[int32](2),
			want: []string{"d", "a"}},
		"the limit reached": {
			envs: with(func(e []warmEnv) { e[0].running, e[1].running = true, true }), percent: 100, maxRunning: ptr.To[int32](2)},
		"no environments": {percent: 100},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, decideWarm(tc.envs, tc.percent, tc.maxRunning)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
