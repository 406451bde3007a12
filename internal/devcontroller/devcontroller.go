// Package devcontroller builds the controller `userland dev` runs in its
// own process. It is its own package, above both internal/controller and
// internal/devenv, so that devenv need not import the reconciler and the
// command, the real-node tests and the bench all run the same one.
package devcontroller

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/devenv"
)

// stacks numbers the dev stacks this process started.
var stacks atomic.Int32

// New is devenv.Options.NewController: the controller with dev mode's
// settings, its metrics in a registry of its own and no probe or metrics
// listener. One process may start a stack after another (a test or the
// bench runs one on kwok, then one on a real node), so each stack's
// certificate rotator gets a name of its own and the manager may be built
// again.
func New(cfg *rest.Config, s devenv.ControllerSettings) (devenv.Runnable, error) {
	if s.Webhooks != nil {
		w := *s.Webhooks
		w.RotatorName = fmt.Sprintf("cert-rotator-%d", stacks.Add(1))
		s.Webhooks = &w
	}
	return controller.NewManager(cfg, controller.Options{
		MetricsAddr: "0", ProbeAddr: "0", Workers: 4, Registry: prometheus.NewRegistry(),
		GatewayURL: s.GatewayURL, GatewaySelector: s.GatewaySelector, GatewayNamespace: s.GatewayNamespace,
		BaseDomain: s.BaseDomain, Webhooks: s.Webhooks,
		FirstStatusWindow: controller.DefaultFirstStatusWindow,
		AllowRestart:      true,
	})
}
