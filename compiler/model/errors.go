package model

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
)

// ErrUnreachable marks a request that never got an HTTP answer (DNS failure,
// refused connection, TLS failure, timeout before a response).
var ErrUnreachable = errors.New("model endpoint unreachable")

// ErrRejectedKey marks an HTTP 401 or 403 from the provider.
var ErrRejectedKey = errors.New("API key rejected")

// describe turns a provider error into one that names what the operator must
// fix: the endpoint that could not be reached or the key variable that was
// rejected. status is the HTTP status when the provider answered, else 0.
func describe(p Provider, endpoint string, status int, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return fmt.Errorf("calling %s at %s: %w: check %s (HTTP %d)", p, endpoint, ErrRejectedKey, keyVar[p], status)
	case status != 0:
		return fmt.Errorf("calling %s at %s: HTTP %d: %w", p, endpoint, status, err)
	}
	var ne net.Error
	var ue *url.Error
	var oe *net.OpError
	if errors.As(err, &ue) || errors.As(err, &oe) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("calling %s: %w: %s (set the base URL with --base-url or %s): %w", p, ErrUnreachable, endpoint, baseURLVar[p], err)
	}
	return fmt.Errorf("calling %s at %s: %w", p, endpoint, err)
}
