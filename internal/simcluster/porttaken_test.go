package simcluster

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAPortTakenIsRetriedThenReported: an API server whose port another
// process holds cannot start; Start tries again (each attempt bringing
// etcd and the API server up afresh and stopping them) and then reports
// the bind failure itself, not a timeout. (A port taken only once, the CI
// race, succeeds on the next attempt's fresh port; the port is pinned here
// so that every attempt meets it.)
func TestAPortTakenIsRetriedThenReported(t *testing.T) {
	bins, err := FindBinaries(APIOnly, os.Getenv(BinariesEnvVar), FindCheckout("."))
	if err != nil {
		t.Fatalf("%v (make test provides the control plane)", err)
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()
	port := held.Addr().(*net.TCPAddr).Port
	began := time.Now()
	c, err := Start(context.Background(), Options{Mode: APIOnly, BinariesDir: bins, CRDDirectoryPaths: []string{"../../config/crd/bases"},
		APIServerArgs: map[string]string{"secure-port": strconv.Itoa(port)}})
	if err == nil {
		_ = c.Stop()
		t.Fatalf("an API server started on port %d, which this test holds", port)
	}
	if !portTaken(err) || !strings.Contains(err.Error(), "kube-apiserver") {
		t.Errorf("Start's error does not say the API server's port was taken: %v", err)
	}
	t.Logf("TIMING %d attempts refused in %s: %v", startAttempts, time.Since(began).Round(10*time.Millisecond), err)
}

func TestPortTaken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New(`waiting for kube-apiserver: kube-apiserver exited (exit status 1); last log lines: "failed to listen on 127.0.0.1:40741: listen tcp 127.0.0.1:40741: bind: address already in use"`), true},
		{errors.New("waiting for kube-apiserver: context deadline exceeded"), false},
	} {
		if got := portTaken(tc.err); got != tc.want {
			t.Errorf("portTaken(%q) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
