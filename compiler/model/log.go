package model

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"ironcurtain.dev/compiler"
)

// Log writes one JSON object per line for every model interaction: the
// prompt as sent, the reply, token usage, duration and error; cache hits are
// logged too (with "cache":"hit") so the log explains every step of a run.
// It is safe for concurrent use.
type Log struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
	err error
}

// NewLog returns a Log writing to w. now is the clock (nil means time.Now).
func NewLog(w io.Writer, now func() time.Time) *Log {
	if now == nil {
		now = time.Now
	}
	return &Log{w: w, now: now}
}

// Entry is one line of the log.
type Entry struct {
	Time       time.Time          `json:"time"`
	Step       string             `json:"step"`
	Model      string             `json:"model"`
	Cache      string             `json:"cache,omitempty"`
	Key        string             `json:"key,omitempty"`
	System     string             `json:"system,omitempty"`
	Messages   []compiler.Message `json:"messages,omitempty"`
	Reply      string             `json:"reply,omitempty"`
	Usage      *compiler.Usage    `json:"usage,omitempty"`
	DurationMS int64              `json:"durationMs"`
	Error      string             `json:"error,omitempty"`
}

// Write appends e. The first write error is kept and returned by Err; later
// writes are skipped so a full disk does not interleave half lines.
func (l *Log) Write(e Entry) {
	if l == nil {
		return
	}
	b, err := json.Marshal(e)
	if err != nil {
		b, _ = json.Marshal(Entry{Time: e.Time, Step: e.Step, Model: e.Model, Error: "encoding log entry: " + err.Error()})
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if _, err := l.w.Write(b); err != nil {
		l.err = fmt.Errorf("writing interaction log: %w", err)
	}
}

// Err reports the first write failure.
func (l *Log) Err() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Now returns the log's clock reading.
func (l *Log) Now() time.Time {
	if l == nil {
		return time.Now()
	}
	return l.now()
}

// Logged returns a Model that records every call into m on log. name is the
// model's "provider:model" name for the log.
func Logged(m compiler.Model, log *Log, name string) compiler.Model {
	return &logged{m: m, log: log, name: name}
}

type logged struct {
	m    compiler.Model
	log  *Log
	name string
}

func (l *logged) Complete(ctx context.Context, p compiler.Prompt) (compiler.Reply, error) {
	start := time.Now()
	reply, err := l.m.Complete(ctx, p)
	e := Entry{
		Time:       l.log.Now(),
		Step:       p.Step,
		Model:      l.name,
		System:     p.System,
		Messages:   p.Messages,
		Reply:      reply.Text,
		DurationMS: time.Since(start).Milliseconds(),
	}
	if err != nil {
		e.Error = err.Error()
	} else {
		u := reply.Usage
		e.Usage = &u
	}
	l.log.Write(e)
	return reply, err
}
