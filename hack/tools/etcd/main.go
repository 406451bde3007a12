// Command etcd is the upstream etcd server, built from go.etcd.io/etcd/server/v3.
package main

import (
	"os"

	"github.com/userland-dev/userland/hack/tools/parentwatch"
	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	parentwatch.Start()
	etcdmain.Main(os.Args)
}
