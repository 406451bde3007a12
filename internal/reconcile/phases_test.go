package reconcile

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	ctrl "sigs.k8s.io/controller-runtime"
)

func TestRun(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	// step records that it ran and returns res and err.
	step := func(name string, requeue time.Duration, err error) Phase[*[]string] {
		return func(_ context.Context, ran *[]string) (ctrl.Result, error) {
			*ran = append(*ran, name)
			return ctrl.Result{RequeueAfter: requeue}, err
		}
	}
	type outcome struct {
		Ran    []string
		Result ctrl.Result
		Stop   *Stop
		Err    string
	}
	tests := []struct {
		name   string
		phases []Phase[*[]string]
		want   outcome
	}{
		{"no phases", nil, outcome{}},
		{"every phase runs, in order", []Phase[*[]string]{step("a", 0, nil), step("b", 0, nil), step("c", 0, nil)},
			outcome{Ran: []string{"a", "b", "c"}}},
		{"the soonest requeue wins; none is not the soonest", []Phase[*[]string]{step("a", time.Minute, nil), step("b", 0, nil), step("c", time.Second, nil), step("d", time.Hour, nil)},
			outcome{Ran: []string{"a", "b", "c", "d"}, Result: ctrl.Result{RequeueAfter: time.Second}}},
		{"an error ends the phases, without their requeues", []Phase[*[]string]{step("a", time.Second, nil), step("b", time.Minute, boom), step("c", 0, nil)},
			outcome{Ran: []string{"a", "b"}, Err: "boom"}},
		{"a stall ends the phases and is no error", []Phase[*[]string]{step("a", time.Second, nil), step("b", 0, Stalled("NameConflict", "taken")), step("c", 0, nil)},
			outcome{Ran: []string{"a", "b"}, Stop: &Stop{Reason: "NameConflict", Message: "taken", Stalled: true}}},
		{"a wait ends the phases and is no error", []Phase[*[]string]{step("a", 0, Waiting("TemplateNotFound", "waiting")), step("b", 0, nil)},
			outcome{Ran: []string{"a"}, Stop: &Stop{Reason: "TemplateNotFound", Message: "waiting"}}},
		{"a wrapped stop is a stop", []Phase[*[]string]{step("a", 0, fmt.Errorf("claims: %w", Stalled("VolumeConflict", "theirs")))},
			outcome{Ran: []string{"a"}, Stop: &Stop{Reason: "VolumeConflict", Message: "theirs", Stalled: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran []string
			res, stop, err := Run(context.Background(), &ran, tt.phases...)
			got := outcome{Ran: ran, Result: res, Stop: stop}
			if err != nil {
				got.Err = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Run (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLowestRequeue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b time.Duration
		want time.Duration
	}{
		{"neither", 0, 0, 0},
		{"only the first", time.Minute, 0, time.Minute},
		{"only the second", 0, time.Minute, time.Minute},
		{"the second is sooner", time.Minute, time.Second, time.Second},
		{"the first is sooner", time.Second, time.Minute, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LowestRequeue(ctrl.Result{RequeueAfter: tt.a}, ctrl.Result{RequeueAfter: tt.b})
			if diff := cmp.Diff(ctrl.Result{RequeueAfter: tt.want}, got); diff != "" {
				t.Errorf("LowestRequeue (-want +got):\n%s", diff)
			}
		})
	}
}
