package webhook

import (
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A replica whose webhooks are not registered yet (cert-controller has not
// made the key pair) is not ready, and the check does not ask the manager
// for the webhook server, which would start it without a certificate.
func TestNotReadyBeforeTheCertificate(t *testing.T) {
	var registered atomic.Bool
	// A nil manager: touching it would panic.
	err := startedOnceRegistered(&registered, nil)(httptest.NewRequest("GET", "/readyz", nil))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("not registered yet: got %v, want an error naming the certificate", err)
	}
}
