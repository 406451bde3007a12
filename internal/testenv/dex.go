package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/userland-dev/userland/internal/simcluster"
)

// DexUser is a static password user of the test OpenID provider.
type DexUser struct {
	Email, Username, Password string
}

// Dex is a running Dex OpenID provider.
type Dex struct {
	// Issuer is the issuer URL.
	Issuer string
	// ClientID and ClientSecret are the gateway's client.
	ClientID, ClientSecret string
	proc                   *simcluster.Process
}

// StartDex runs Dex (built by hack/build-control-plane.sh) with in-memory
// storage, the given password users and one client allowed to redirect to
// redirectURL.
func StartDex(dir, redirectURL string, users []DexUser) (*Dex, error) {
	bins, err := simcluster.FindBinaries(APIOnly, "", RepoRoot())
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(bins, "dex")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("dex is missing from %s: run `make control-plane`", bins)
	}
	addr, err := simcluster.FreeAddr()
	if err != nil {
		return nil, err
	}
	d := &Dex{Issuer: "http://" + addr + "/dex", ClientID: "userland", ClientSecret: "userland-test-secret"}

	var b strings.Builder
	fmt.Fprintf(&b, "issuer: %s\nstorage:\n  type: memory\nweb:\n  http: %s\n", d.Issuer, addr)
	b.WriteString("oauth2:\n  skipApprovalScreen: true\nenablePasswordDB: true\nstaticPasswords:\n")
	for i, u := range users {
		// Dex refuses hashes cheaper than the default cost.
		hash, err := bcrypt.GenerateFromPassword([]byte(u.Password), bcrypt.DefaultCost)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "- email: %q\n  username: %q\n  hash: %q\n  userID: \"user-%d\"\n", u.Email, u.Username, hash, i)
	}
	fmt.Fprintf(&b, "staticClients:\n- id: %s\n  secret: %s\n  name: Userland\n  redirectURIs: [%q]\n", d.ClientID, d.ClientSecret, redirectURL)
	config := filepath.Join(dir, "dex.yaml")
	if err := os.WriteFile(config, []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	if d.proc, err = simcluster.StartProcess(dir, "dex", bin, "serve", config); err != nil {
		return nil, err
	}
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if err := d.proc.Exited(); err != nil {
			return false, err
		}
		resp, err := http.Get(d.Issuer + "/.well-known/openid-configuration")
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		_ = d.Stop()
		return nil, fmt.Errorf("waiting for dex: %w", err)
	}
	return d, nil
}

// Stop ends Dex.
func (d *Dex) Stop() error { return d.proc.Stop(5 * time.Second) }
