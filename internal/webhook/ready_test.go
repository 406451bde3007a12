package webhook_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestReadyOnceTheWebhooksServe: a replica's /readyz includes its webhook
// server (the check is registered under "webhook", and passes once the
// server answers TLS with the certificate cert-controller made), so the
// webhook's Service sends the API server's calls only to replicas that can
// answer them.
func TestReadyOnceTheWebhooksServe(t *testing.T) {
	startWebhooks(t)
	resp, err := http.Get("http://" + probeAddr + "/readyz/webhook")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz/webhook: %s %q, want 200 (404: no such check)", resp.Status, strings.TrimSpace(string(body)))
	}
}
