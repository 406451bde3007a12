// Command kubelet is the upstream kubelet, built from k8s.io/kubernetes for
// the real test node (hack/build-node.sh).
package main

import (
	"context"
	"os"

	"github.com/userland-dev/userland/hack/tools/parentwatch"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client metric registration, as upstream
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric registration, as upstream
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	parentwatch.Start()
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
