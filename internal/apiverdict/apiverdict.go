// Package apiverdict sorts the API server's answers to a request that
// failed into what the caller should do about them. Each class is decided
// here once, for the controller and the gateway alike.
package apiverdict

import (
	"errors"
	"net"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// NamespaceTerminating reports the API server refusing to create something
// because its namespace is being deleted: nothing can be created there
// again, so retrying is pointless.
func NamespaceTerminating(err error) bool {
	return apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// Refused reports an answer that says the request was not carried out: a
// 4xx other than a timeout (408) or throttling (429). Anything else,
// a timeout or a lost connection above all, may have been carried out.
func Refused(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	code := status.Status().Code
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
}

// Unreachable reports an API server that did not answer (down, overloaded
// or too slow) rather than one that refused: the person should try again
// later, not change anything. Whether the request was carried out all the
// same is Uncertain's question.
func Unreachable(err error) bool {
	var netErr net.Error // client-go's *url.Error is one, whatever it wraps
	return errors.As(err, &netErr) || apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err)
}

// Uncertain reports an unanswered request that may have been carried out
// nonetheless: it reached the API server, and no answer came in time (a
// timeout, a connection lost mid-request). A connection never made, and
// throttling or unavailability, which the API server answers before any
// work, are certain: nothing was done.
func Uncertain(err error) bool {
	if !Unreachable(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) {
		return false
	}
	var op *net.OpError
	return !errors.As(err, &op) || op.Op != "dial"
}
