// Package structured asks a model for JSON that must match a schema: it
// appends the JSON Schema to the request, extracts the JSON from the reply,
// validates it against the schema and then against the step's own semantic
// checks, and on failure feeds the validation error back to the model for a
// bounded number of retries. Valid replies are cached under a content hash of
// the whole request, so an unchanged step makes no model call.
package structured

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/google/jsonschema-go/jsonschema"

	"ironcurtain.dev/compiler"
	"ironcurtain.dev/compiler/cache"
	"ironcurtain.dev/compiler/model"
)

// DefaultRetries is how often a malformed reply is sent back for correction.
const DefaultRetries = 2

// ErrInvalidReply is returned when the model never produced a valid reply.
var ErrInvalidReply = errors.New("model reply failed validation")

// Runner runs structured steps against one model. It is safe for concurrent
// use; the counters are updated atomically.
type Runner struct {
	// Model answers the prompts (already limited and logged).
	Model compiler.Model
	// ModelName is the "provider:model" name; it is part of every cache key.
	ModelName string
	// Cache stores valid replies; nil disables caching.
	Cache *cache.Store
	// Log records cache hits (model calls are logged by the model wrapper).
	Log *model.Log
	// Logger receives warnings (a cache that cannot be written).
	Logger *slog.Logger
	// Retries is how often an invalid reply is sent back; negative means 0,
	// zero means DefaultRetries.
	Retries int

	calls  atomic.Int64
	hits   atomic.Int64
	misses atomic.Int64
}

// Stats counts what a Runner did.
type Stats struct {
	// ModelCalls is the number of prompts sent to the model (retries included).
	ModelCalls int64
	// CacheHits is the number of steps answered from the cache.
	CacheHits int64
	// CacheMisses is the number of steps that had to ask the model.
	CacheMisses int64
}

// Stats returns the counters so far.
func (r *Runner) Stats() Stats {
	return Stats{ModelCalls: r.calls.Load(), CacheHits: r.hits.Load(), CacheMisses: r.misses.Load()}
}

// Request is one structured step.
type Request struct {
	// Step labels the step in logs and errors ("compile/git").
	Step string
	// System is the system prompt.
	System string
	// History holds earlier turns of a multi-turn session (user, assistant,
	// user, assistant, ...); empty for a single-shot step.
	History []compiler.Message
	// User is the instruction; the schema is appended to it.
	User string
	// Schema is what the reply must match.
	Schema *jsonschema.Schema
	// MaxTokens bounds each reply (zero: the model package default).
	MaxTokens int
}

// Result is a validated reply.
type Result[T any] struct {
	Value T
	// Conversation is History plus the user turn and the valid assistant
	// reply, ready to continue a multi-turn session.
	Conversation []compiler.Message
	// Cached says the reply came from the cache.
	Cached bool
}

// Generate runs req and decodes the reply into T, then runs check on it.
// check reports semantic errors (unknown tool names, a role the registry
// lacks, ...) in words the model can act on; it may be nil.
func Generate[T any](ctx context.Context, r *Runner, req Request, check func(*T) error) (Result[T], error) {
	if req.Schema == nil {
		return Result[T]{}, fmt.Errorf("running %s: no schema", req.Step)
	}
	resolved, err := req.Schema.Resolve(nil)
	if err != nil {
		return Result[T]{}, fmt.Errorf("resolving schema of %s: %w", req.Step, err)
	}
	schemaJSON, err := json.MarshalIndent(req.Schema, "", "  ")
	if err != nil {
		return Result[T]{}, fmt.Errorf("encoding schema of %s: %w", req.Step, err)
	}
	user := req.User + "\n\nReply with a single JSON object and nothing else. It must match this JSON Schema:\n" + string(schemaJSON)
	msgs := append(append([]compiler.Message(nil), req.History...), compiler.Message{Role: compiler.User, Content: user})

	key, err := keyFor(r.ModelName, req.System, msgs, req.MaxTokens)
	if err != nil {
		return Result[T]{}, fmt.Errorf("hashing %s: %w", req.Step, err)
	}
	if cached, ok, err := r.Cache.Get(key); err != nil {
		r.warn("reading cache", req.Step, err)
	} else if ok {
		v, verr := decode[T](cached, req.Schema, resolved, check)
		if verr == nil {
			r.hits.Add(1)
			r.Log.Write(model.Entry{Time: r.Log.Now(), Step: req.Step, Model: r.ModelName, Cache: "hit", Key: key})
			return Result[T]{Value: v, Conversation: withReply(msgs, string(cached)), Cached: true}, nil
		}
		r.warn("discarding cached reply that no longer validates", req.Step, verr)
	}
	r.misses.Add(1)

	retries := r.Retries
	switch {
	case retries == 0:
		retries = DefaultRetries
	case retries < 0:
		retries = 0
	}
	convo := msgs
	var lastErr error
	for attempt := 0; attempt <= retries; attempt++ {
		step := req.Step
		if attempt > 0 {
			step = fmt.Sprintf("%s/retry-%d", req.Step, attempt)
		}
		r.calls.Add(1)
		reply, err := r.Model.Complete(ctx, compiler.Prompt{Step: step, System: req.System, Messages: convo, MaxTokens: req.MaxTokens})
		if err != nil {
			return Result[T]{}, fmt.Errorf("running %s: %w", req.Step, err)
		}
		raw, xerr := extractJSON(reply.Text)
		var v T
		if xerr == nil {
			v, xerr = decode[T](raw, req.Schema, resolved, check)
		}
		if xerr == nil {
			if err := r.Cache.Put(key, raw); err != nil {
				r.warn("writing cache", req.Step, err)
			}
			return Result[T]{Value: v, Conversation: withReply(msgs, string(raw))}, nil
		}
		lastErr = xerr
		convo = append(append([]compiler.Message(nil), convo...),
			compiler.Message{Role: compiler.Assistant, Content: reply.Text},
			compiler.Message{Role: compiler.User, Content: "Your reply failed validation:\n" + xerr.Error() +
				"\n\nFix these errors and reply with the complete corrected JSON object only."})
	}
	return Result[T]{}, fmt.Errorf("running %s: %w after %d attempts: %w", req.Step, ErrInvalidReply, retries+1, lastErr)
}

func (r *Runner) warn(what, step string, err error) {
	if r.Logger != nil {
		r.Logger.Warn(what, "step", step, "error", err)
	}
}

func withReply(msgs []compiler.Message, reply string) []compiler.Message {
	return append(append([]compiler.Message(nil), msgs...), compiler.Message{Role: compiler.Assistant, Content: reply})
}

func keyFor(modelName, system string, msgs []compiler.Message, maxTokens int) (string, error) {
	m, err := json.Marshal(msgs)
	if err != nil {
		return "", err
	}
	return cache.Key(cache.Version, modelName, system, string(m), fmt.Sprint(maxTokens)), nil
}

// decode validates raw against the schema, decodes it into T and runs check.
func decode[T any](raw []byte, schema *jsonschema.Schema, resolved *jsonschema.Resolved, check func(*T) error) (T, error) {
	var zero T
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return zero, fmt.Errorf("the reply is not valid JSON: %w", err)
	}
	var probs []string
	problems(schema, generic, "", &probs)
	if len(probs) > 0 {
		return zero, fmt.Errorf("the reply does not match the schema:\n%s", strings.Join(probs, "\n"))
	}
	if err := resolved.Validate(generic); err != nil {
		return zero, fmt.Errorf("the reply does not match the schema: %w", err)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return zero, fmt.Errorf("the reply does not match the schema: %w", err)
	}
	if check != nil {
		if err := check(&v); err != nil {
			return zero, err
		}
	}
	return v, nil
}

// extractJSON finds the JSON object in a reply: inside a ```json fence if
// there is one, else the first complete object in the text.
func extractJSON(text string) ([]byte, error) {
	s := text
	if i := strings.Index(s, "```"); i >= 0 {
		rest := s[i+3:]
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[nl+1:]
		}
		if j := strings.Index(rest, "```"); j >= 0 {
			s = rest[:j]
		}
	}
	start := strings.IndexByte(s, '{')
	if start < 0 {
		return nil, errors.New("the reply contains no JSON object")
	}
	dec := json.NewDecoder(strings.NewReader(s[start:]))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("the reply is not valid JSON: %w", err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return nil, fmt.Errorf("the reply is not valid JSON: %w", err)
	}
	return out.Bytes(), nil
}
