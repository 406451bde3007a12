package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/gateway"
	"github.com/userland-dev/userland/internal/testobj"
)

// TestExhaustedBudgetPageSaysWhenAndWhomToAsk: once an environment's
// budget is used up, opening it shows when the budget resets and whom to
// ask, and records no activity (which would start it by itself at the
// reset).
func TestExhaustedBudgetPageSaysWhenAndWhomToAsk(t *testing.T) {
	f := setup(t, func(s *gateway.Server) {
		trustedHeaders(s)
		s.Activity.Now = func() time.Time { return clock.Now().Add(time.Second) }
	})
	ctx := context.Background()
	tmpl := testobj.MakeTemplate(f.ns, "metered").Container("web").Obj()
	tmpl.Spec.Budget = &v1alpha1.BudgetSpec{Hours: 1, Period: v1alpha1.BudgetWeek, Weighting: v1alpha1.WeightingNone}
	carol := testobj.MakeUserland(f.ns, "carol", "carol", "metered").Obj()
	for _, o := range []client.Object{tmpl, carol} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	f.waitPhase(t, "carol", v1alpha1.PhaseReady)

	clock.SetTime(clock.Now().Add(61 * time.Minute))
	var ul v1alpha1.Userland
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "carol"}, &ul); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ul.DeepCopy())
	ul.Annotations = map[string]string{"test/poke": "1"}
	if err := env.Client.Patch(ctx, &ul, patch); err != nil {
		t.Fatal(err)
	}
	f.waitPhase(t, "carol", v1alpha1.PhaseStopped)

	headers := as("carol", "")
	headers["Sec-Fetch-Mode"] = "navigate"
	resp, body := get(t, http.DefaultClient, f.gateway.URL+"/u/"+f.ns+"/carol/", headers)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("opening an exhausted environment: %s, want 503", resp.Status)
	}
	for _, want := range []string{"budget for this environment is used up", "It resets on Monday", "ask an administrator", "files were kept"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page does not say %q:\n%s", want, body)
		}
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "carol"}, &ul); err != nil {
		t.Fatal(err)
	}
	if ul.Status.LastActivityTime != nil || ul.Status.StoppedReason != v1alpha1.StoppedBudgetExhausted {
		t.Errorf("after the visit: activity %v, stopped as %q; want no activity, BudgetExhausted", ul.Status.LastActivityTime, ul.Status.StoppedReason)
	}
}
