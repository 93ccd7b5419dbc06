package model

import (
	"context"

	"ironcurtain.dev/compiler"
)

// Limit returns a Model that lets at most n calls into m run at once; the
// rest wait (or give up when their context ends). Every step of a pipeline
// shares one limited model, so n is the whole run's concurrency. n < 1 means 1.
func Limit(m compiler.Model, n int) compiler.Model {
	if n < 1 {
		n = 1
	}
	return &limited{m: m, slots: make(chan struct{}, n)}
}

type limited struct {
	m     compiler.Model
	slots chan struct{}
}

func (l *limited) Complete(ctx context.Context, p compiler.Prompt) (compiler.Reply, error) {
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return compiler.Reply{}, ctx.Err()
	}
	defer func() { <-l.slots }()
	return l.m.Complete(ctx, p)
}
