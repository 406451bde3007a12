package webhook

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/userland-dev/userland/internal/access"
)

// requester is the person (or program) whose request is being admitted,
// as the API server authenticated them. Checks of what an object makes the
// controller do on that person's behalf ask access.Reviewer about them.
func requester(ctx context.Context) (access.Subject, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return access.Subject{}, errors.New("the admission request carries no requester")
	}
	return access.FromUserInfo(req.UserInfo), nil
}
