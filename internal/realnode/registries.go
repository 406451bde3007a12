package realnode

import (
	"fmt"
	"os"
	"path/filepath"
)

// registryHostsDir, under the state directory, is containerd's
// config_path: a directory per registry host ("host:port") with its
// hosts.toml. Nothing is there unless a test puts it there.
const registryHostsDir = "containerd/certs.d"

// TrustPlainHTTPRegistry lets the node's containerd pull from host
// ("host:port") over plain HTTP: a registry a test serves inside the
// node's network namespace (Listen), which has no certificate. Only the
// node's containerd reads it, and the teardown removes it with the state
// directory. containerd reads the hosts directory at each pull, so this
// works on a running node.
func (n *Node) TrustPlainHTTPRegistry(host string) error {
	dir := n.path(registryHostsDir, host)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	hosts := fmt.Sprintf("server = %[1]q\n\n[host.%[1]q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+host)
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o600)
}
