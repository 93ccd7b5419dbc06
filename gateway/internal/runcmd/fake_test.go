package runcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"ironcurtain.dev/gateway/internal/escalation"
	"ironcurtain.dev/gateway/internal/ops/opsapi"
	"ironcurtain.dev/gateway/internal/session/minted"
)

// fakeDocker keeps containers in memory. A container exits when its exit
// channel gets a code: Stop sends 143 unless ignoreStop, Remove 137.
type fakeDocker struct {
	mu         sync.Mutex
	containers map[string]*fakeContainer
	n          int

	networkErr, imageErr, startErr error
	startLeaves                    bool // Start fails after creating (the id is returned)
	ignoreStop                     bool
	stops                          int
	output                         string
}

type fakeContainer struct {
	spec Spec
	// token is what the token file held at start, with its modes.
	token                   string
	tokenMode, tokenDirMode fs.FileMode
	exit                    chan int64
	exited                  bool
	out                     *io.PipeWriter
	outR                    *io.PipeReader
	in                      *strings.Builder
}

func newFakeDocker() *fakeDocker { return &fakeDocker{containers: map[string]*fakeContainer{}} }

func (f *fakeDocker) CheckNetwork(context.Context, string) error { return f.networkErr }
func (f *fakeDocker) CheckImage(context.Context, string) error   { return f.imageErr }

func (f *fakeDocker) Start(_ context.Context, s Spec) (string, Stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.startErr != nil && !f.startLeaves {
		return "", Stream{}, f.startErr
	}
	f.n++
	id := fmt.Sprintf("c%064d", f.n)
	pr, pw := io.Pipe()
	c := &fakeContainer{spec: s, exit: make(chan int64, 1), out: pw, outR: pr, in: &strings.Builder{}}
	if b, err := os.ReadFile(s.TokenFile); err == nil {
		c.token = string(b)
		if fi, err := os.Stat(s.TokenFile); err == nil {
			c.tokenMode = fi.Mode()
		}
		if fi, err := os.Stat(filepath.Dir(s.TokenFile)); err == nil {
			c.tokenDirMode = fi.Mode()
		}
	}
	f.containers[id] = c
	if f.startErr != nil {
		return id, Stream{}, f.startErr
	}
	go func() { _, _ = io.WriteString(pw, f.output) }()
	st := Stream{Output: pr, Close: func() { _ = pr.Close() }}
	if s.Stdin {
		st.Input = nopWriteCloser{c, &f.mu}
	}
	return id, st, nil
}

type nopWriteCloser struct {
	c  *fakeContainer
	mu *sync.Mutex
}

func (n nopWriteCloser) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.c.in.Write(p)
}
func (n nopWriteCloser) Close() error { return nil }

func (f *fakeDocker) Find(_ context.Context, session string) (string, map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, c := range f.containers {
		if c.spec.Labels[LabelSession] == session {
			return id, c.spec.Labels, nil
		}
	}
	return "", nil, nil
}

func (f *fakeDocker) Attach(_ context.Context, id string, _ bool) (Stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return Stream{}, errors.New("no such container")
	}
	pr, pw := io.Pipe()
	c.out, c.outR = pw, pr
	return Stream{Output: pr, Close: func() { _ = pr.Close() }}, nil
}

func (f *fakeDocker) Wait(ctx context.Context, id string) (int64, error) {
	f.mu.Lock()
	c, ok := f.containers[id]
	f.mu.Unlock()
	if !ok {
		return -1, errors.New("no such container")
	}
	select {
	case code := <-c.exit:
		return code, nil
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// exit makes container id exit with code (the agent finished).
func (f *fakeDocker) exit(id string, code int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exitLocked(id, code)
}

func (f *fakeDocker) exitLocked(id string, code int64) {
	c, ok := f.containers[id]
	if !ok || c.exited {
		return
	}
	c.exited = true
	_ = c.out.Close()
	c.exit <- code
}

func (f *fakeDocker) Stop(_ context.Context, id string, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops++
	if !f.ignoreStop {
		f.exitLocked(id, 143)
	}
	return nil
}

func (f *fakeDocker) Remove(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exitLocked(id, 137)
	delete(f.containers, id)
	return nil
}

func (f *fakeDocker) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.containers)
}

func (f *fakeDocker) only() (string, *fakeContainer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, c := range f.containers {
		return id, c
	}
	return "", nil
}

// fakeOps is the ops API in memory.
type fakeOps struct {
	mu          sync.Mutex
	sessions    map[string]*opsapi.SessionSummary
	escalations []escalation.Escalation // newest first, like the API
	decisions   []string
	createErr   error
	workspace   bool
	n           int
	// The escalation event stream: watchErr refuses it; each change
	// signals every open one.
	watchErr error
	watchers map[chan struct{}]bool
	watches  int
}

func newFakeOps() *fakeOps {
	return &fakeOps{sessions: map[string]*opsapi.SessionSummary{}, watchers: map[chan struct{}]bool{}}
}

func (f *fakeOps) WatchEscalations(ctx context.Context) (<-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watches++
	if f.watchErr != nil {
		return nil, f.watchErr
	}
	ch := make(chan struct{}, 1)
	f.watchers[ch] = true
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.watchers[ch] {
			delete(f.watchers, ch)
			close(ch)
		}
	})
	return ch, nil
}

// changedLocked signals the open event streams (f.mu held).
func (f *fakeOps) changedLocked() {
	for ch := range f.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// breakStreams ends the open event streams and refuses new ones.
func (f *fakeOps) breakStreams(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watchErr = err
	for ch := range f.watchers {
		delete(f.watchers, ch)
		close(ch)
	}
}

func (f *fakeOps) streaming() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.watchers)
}

func (f *fakeOps) CreateSession(_ context.Context, r opsapi.CreateSessionRequest) (opsapi.CreatedSession, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.createErr != nil {
		return opsapi.CreatedSession{}, f.createErr
	}
	f.n++
	id := fmt.Sprintf("sess_%026d", f.n)
	m := &minted.Session{ID: id, Name: r.Name, Budget: r.Budget, Labels: r.Labels}
	if f.workspace {
		m.Workspace = "/var/lib/ironcurtain/workspaces/" + id
	}
	s := &opsapi.SessionSummary{SessionID: id, Status: "active", Minted: m}
	f.sessions[id] = s
	return opsapi.CreatedSession{Session: *s, Token: "icsess_secret" + id}, nil
}

func (f *fakeOps) GetSession(_ context.Context, id string) (opsapi.SessionSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[id]
	if !ok {
		return opsapi.SessionSummary{}, &opsapi.APIError{Status: 404, Code: "not_found", Message: "no such session"}
	}
	return *s, nil
}

func (f *fakeOps) RevokeSession(_ context.Context, id, reason string) (opsapi.RevokedSession, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[id]
	if !ok {
		return opsapi.RevokedSession{}, &opsapi.APIError{Status: 404, Code: "not_found", Message: "no such session"}
	}
	s.Status = "revoked"
	s.Minted.RevokeReason = reason
	return opsapi.RevokedSession{Session: *s}, nil
}

func (f *fakeOps) ListEscalations(_ context.Context, flt escalation.ListFilter) ([]escalation.Escalation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []escalation.Escalation
	for _, x := range f.escalations {
		if x.SessionID == flt.Session {
			out = append(out, x)
		}
	}
	return out, nil
}

func (f *fakeOps) Decide(_ context.Context, id string, approve bool, r opsapi.DecideRequest) (escalation.Escalation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.escalations {
		x := &f.escalations[i]
		if x.ID != id {
			continue
		}
		if x.Status != escalation.StatusPending {
			return escalation.Escalation{}, &opsapi.APIError{Status: http.StatusConflict, Code: "conflict", Message: "already decided"}
		}
		x.Status, x.DecidedBy, x.DecisionReason = escalation.StatusDenied, "operator", r.Reason
		if approve {
			x.Status = escalation.StatusApproved
		}
		f.decisions = append(f.decisions, fmt.Sprintf("%s %s reason=%q similar=%q", id, x.Status, r.Reason, r.Similar))
		return *x, nil
	}
	return escalation.Escalation{}, &opsapi.APIError{Status: 404, Code: "not_found", Message: "no such escalation"}
}

// escalate adds a pending escalation to the newest session.
func (f *fakeOps) escalate(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.escalations = append([]escalation.Escalation{{ID: id, SessionID: f.newest(), Kind: escalation.KindToolCall,
		Server: "filesystem", Tool: "write_file", Args: []byte(`{"path":"/workspace/x\u202e"}`), Rule: "escalate-writes",
		Reason: "writes need a human", Status: escalation.StatusPending}}, f.escalations...)
	f.changedLocked()
}

func (f *fakeOps) decideElsewhere(id, status, by, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.escalations {
		if f.escalations[i].ID == id {
			f.escalations[i].Status, f.escalations[i].DecidedBy, f.escalations[i].DecisionReason = status, by, reason
		}
	}
	f.changedLocked()
}

func (f *fakeOps) newest() string { return fmt.Sprintf("sess_%026d", f.n) }

func (f *fakeOps) setStatus(status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions[f.newest()].Status = status
}

func (f *fakeOps) allRevoked() (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sessions {
		if s.Status != "revoked" {
			return len(f.sessions), false
		}
	}
	return len(f.sessions), true
}

type fakeVerifier struct{}

func (fakeVerifier) Verify(_ context.Context, s string) (string, error) {
	return "chain verified: " + s, nil
}

// syncBuffer is a strings.Builder safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
