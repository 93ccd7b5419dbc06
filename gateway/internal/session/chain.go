package session

import (
	"context"
	"errors"
)

// Chain tries each Authenticator in order and returns the first session
// found. A token no authenticator knows is ErrUnknownToken; when one of
// them failed for another reason (the database is down), that error is
// returned instead, wrapped, so a caller can log it: either way the request
// is refused.
type Chain []Authenticator

var _ Authenticator = Chain(nil)

// Authenticate implements Authenticator.
func (c Chain) Authenticate(ctx context.Context, token string) (Session, error) {
	if token == "" {
		return Session{}, ErrUnknownToken
	}
	var failure error
	for _, a := range c {
		s, err := a.Authenticate(ctx, token)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, ErrUnknownToken) && failure == nil {
			failure = err
		}
	}
	if failure != nil {
		return Session{}, failure
	}
	return Session{}, ErrUnknownToken
}
