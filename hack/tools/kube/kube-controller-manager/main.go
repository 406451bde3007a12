// Command kube-controller-manager is the upstream kube-controller-manager, built from k8s.io/kubernetes.
package main

import (
	"os"

	"github.com/userland-dev/userland/hack/tools/parentwatch"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	parentwatch.Start()
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
