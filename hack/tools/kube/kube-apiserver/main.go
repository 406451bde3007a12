// Command kube-apiserver is the upstream kube-apiserver, built from k8s.io/kubernetes.
package main

import (
	"os"

	"github.com/userland-dev/userland/hack/tools/parentwatch"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	parentwatch.Start()
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
