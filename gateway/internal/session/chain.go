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

// ErrBudgetSpent is returned by a ToolCallCharger when the session's
// tool-call budget is used up.
var ErrBudgetSpent = errors.New("the session's tool-call budget is spent")

// ToolCallCharger counts tool calls against a session's own budget
// (Session.Budget.MaxToolCalls). The minted-session store implements it
// atomically across replicas.
type ToolCallCharger interface {
	// ChargeToolCall counts one call; ErrBudgetSpent (wrapped) when the
	// budget is used up, any other error when it could not be checked.
	ChargeToolCall(ctx context.Context, sessionID string) (used, limit int64, err error)
}

// ErrNoCharger: a session has a tool-call budget but no authenticator can
// count its calls.
var ErrNoCharger = errors.New("no store counts this session's tool calls")

// ChargeToolCall implements ToolCallCharger with the first member that does.
func (c Chain) ChargeToolCall(ctx context.Context, sessionID string) (used, limit int64, err error) {
	for _, a := range c {
		if ch, ok := a.(ToolCallCharger); ok {
			return ch.ChargeToolCall(ctx, sessionID)
		}
	}
	return 0, 0, ErrNoCharger
}
