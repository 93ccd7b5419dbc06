package session

import (
	"context"
	"errors"
	"testing"
)

type fakeAuth struct {
	tokens map[string]Session
	err    error
	calls  int
}

func (f *fakeAuth) Authenticate(_ context.Context, tok string) (Session, error) {
	f.calls++
	if f.err != nil {
		return Session{}, f.err
	}
	if s, ok := f.tokens[tok]; ok {
		return s, nil
	}
	return Session{}, ErrUnknownToken
}

type fakeCharger struct{ fakeAuth }

func (f *fakeCharger) ChargeToolCall(context.Context, string) (int64, int64, error) {
	return 1, 2, nil
}

func TestChain(t *testing.T) {
	static, err := NewStatic(map[string]string{"agent": "static-token-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	down := errors.New("database down")
	tests := []struct {
		name    string
		second  *fakeAuth
		token   string
		wantID  string
		wantErr error
	}{
		{name: "static first", second: &fakeAuth{err: down}, token: "static-token-0123456789", wantID: "agent"},
		{name: "then minted", second: &fakeAuth{tokens: map[string]Session{"icsess_x": {ID: "sess_a"}}}, token: "icsess_x", wantID: "sess_a"},
		{name: "unknown everywhere", second: &fakeAuth{}, token: "nope", wantErr: ErrUnknownToken},
		{name: "store down refuses", second: &fakeAuth{err: down}, token: "icsess_x", wantErr: down},
		{name: "empty token", second: &fakeAuth{tokens: map[string]Session{"": {ID: "x"}}}, token: "", wantErr: ErrUnknownToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Chain{static, tt.second}.Authenticate(context.Background(), tt.token)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if s.ID != "" {
					t.Fatalf("a refused token got session %q", s.ID)
				}
				return
			}
			if err != nil || s.ID != tt.wantID {
				t.Fatalf("got %q, %v; want %q", s.ID, err, tt.wantID)
			}
		})
	}
}

func TestChainCharger(t *testing.T) {
	if _, _, err := (Chain{&fakeAuth{}}).ChargeToolCall(context.Background(), "s"); !errors.Is(err, ErrNoCharger) {
		t.Fatalf("err = %v, want ErrNoCharger", err)
	}
	used, limit, err := (Chain{&fakeAuth{}, &fakeCharger{}}).ChargeToolCall(context.Background(), "s")
	if err != nil || used != 1 || limit != 2 {
		t.Fatalf("got %d, %d, %v", used, limit, err)
	}
}
