package launcher

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// Docker is the part of the Docker Engine API the launcher uses;
// *client.Client satisfies it.
type Docker interface {
	ContainerCreate(ctx context.Context, opts client.ContainerCreateOptions) (client.ContainerCreateResult, error)
	ContainerAttach(ctx context.Context, id string, opts client.ContainerAttachOptions) (client.ContainerAttachResult, error)
	ContainerStart(ctx context.Context, id string, opts client.ContainerStartOptions) (client.ContainerStartResult, error)
	ContainerRemove(ctx context.Context, id string, opts client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
	NetworkInspect(ctx context.Context, id string, opts client.NetworkInspectOptions) (client.NetworkInspectResult, error)
}

var _ Docker = (*client.Client)(nil)

const (
	// requestTimeout bounds reading a request and running it.
	requestTimeout = 60 * time.Second
	// maxStderrLine caps one logged stderr line of a server.
	maxStderrLine = 4096
)

// Launcher serves requests for the servers of its configuration.
type Launcher struct {
	cfg    *Config
	token  []byte
	docker Docker
	log    *slog.Logger

	mu      sync.Mutex
	running map[string]string // server name → container id started by this launcher
}

// New returns a launcher for cfg (validated), the shared token and a Docker
// client.
func New(cfg *Config, token []byte, d Docker, log *slog.Logger) (*Launcher, error) {
	if len(token) < minTokenBytes {
		return nil, errors.New("creating launcher: the token is too short")
	}
	if d == nil {
		return nil, errors.New("creating launcher: no Docker client")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Launcher{cfg: cfg, token: bytes.Clone(token), docker: d, log: log, running: map[string]string{}}, nil
}

// Serve accepts connections on ln until ctx ends, then ends every stream
// (removing the containers it started) and returns.
func (l *Launcher) Serve(ctx context.Context, ln net.Listener) error {
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accepting: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Handle(ctx, c)
		}()
	}
}

// Handle runs one connection: one request, one reply, and for start and
// attach the stream. It closes c.
func (l *Launcher) Handle(ctx context.Context, c net.Conn) {
	defer c.Close()
	// When the launcher stops, every stream ends: the servers' stdin
	// closes and the containers it started are removed.
	stopWatch := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stopWatch()
	_ = c.SetDeadline(time.Now().Add(requestTimeout))
	br := bufio.NewReaderSize(c, MaxRequestBytes+1)
	line, err := readLine(br, MaxRequestBytes)
	if err != nil {
		l.log.Warn("launcher: refused a request", "reason", "unreadable request", "err", err)
		writeReply(c, Reply{Error: "unreadable request"})
		return
	}
	req, err := ParseRequest(line)
	if err != nil {
		l.log.Warn("launcher: refused a request", "err", err)
		writeReply(c, Reply{Error: "bad request"})
		return
	}
	if subtle.ConstantTimeCompare([]byte(req.Token), l.token) != 1 {
		l.log.Warn("launcher: refused a request", "reason", "wrong token", "server", req.Server)
		writeReply(c, Reply{Error: "not authorised"})
		return
	}
	s, ok := l.cfg.Servers[req.Server]
	if !ok {
		l.log.Warn("launcher: refused a request", "reason", "unknown server", "server", req.Server)
		writeReply(c, Reply{Error: "unknown server"})
		return
	}
	log := l.log.With("server", req.Server, "op", req.Op)
	switch req.Op {
	case OpStop:
		if err := l.stop(ctx, req.Server); err != nil {
			log.Error("launcher: stop failed", "err", err)
			writeReply(c, Reply{Error: "stop failed"})
			return
		}
		log.Info("launcher: stopped")
		writeReply(c, Reply{OK: true})
	case OpStart, OpAttach:
		opCtx, cancel := context.WithTimeout(ctx, requestTimeout)
		id, hj, err := l.open(opCtx, req.Op, req.Server, s)
		cancel()
		if err != nil {
			log.Error("launcher: "+req.Op+" failed", "err", err)
			writeReply(c, Reply{Error: req.Op + " failed"})
			return
		}
		log.Info("launcher: "+req.Op+"ed", "container", shortID(id))
		_ = c.SetDeadline(time.Time{})
		if !writeReply(c, Reply{OK: true, Image: s.Image}) {
			hj.Close()
			l.remove(req.Server, id)
			return
		}
		l.pump(log, c, br, hj)
		if req.Op == OpStart {
			l.remove(req.Server, id)
		}
	}
}

// open creates, attaches and starts the container (start) or attaches to
// the running one (attach).
func (l *Launcher) open(ctx context.Context, op, name string, s ServerConfig) (string, client.HijackedResponse, error) {
	attachOpts := client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true}
	if op == OpAttach {
		l.mu.Lock()
		id, ok := l.running[name]
		l.mu.Unlock()
		if !ok {
			return "", client.HijackedResponse{}, errors.New("the server is not running")
		}
		hj, err := l.docker.ContainerAttach(ctx, id, attachOpts)
		if err != nil {
			return "", client.HijackedResponse{}, fmt.Errorf("attaching: %w", err)
		}
		return id, hj.HijackedResponse, nil
	}
	if err := l.checkNetwork(ctx, s.Network); err != nil {
		return "", client.HijackedResponse{}, err
	}
	// One container per server: a leftover one (a crashed run) goes first.
	_ = l.stop(ctx, name)
	spec := BuildSpec(name, s, l.cfg.Proxy, ProxyIdentity(l.token, name))
	created, err := l.create(ctx, spec)
	if err != nil {
		return "", client.HijackedResponse{}, fmt.Errorf("creating the container: %w", err)
	}
	id := created.ID
	hj, err := l.docker.ContainerAttach(ctx, id, attachOpts)
	if err != nil {
		l.forceRemove(id)
		return "", client.HijackedResponse{}, fmt.Errorf("attaching: %w", err)
	}
	if _, err := l.docker.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		hj.Close()
		l.forceRemove(id)
		return "", client.HijackedResponse{}, fmt.Errorf("starting: %w", err)
	}
	l.mu.Lock()
	l.running[name] = id
	l.mu.Unlock()
	return id, hj.HijackedResponse, nil
}

// InhibitIPv4 is the bridge driver option that leaves the bridge without a
// host address.
const InhibitIPv4 = "com.docker.network.bridge.inhibit_ipv4"

// checkNetwork refuses a server network that reaches more than its peers:
// it must be "none", or an internal bridge network without a host address
// (InhibitIPv4). On an internal network that has one, a container reaches
// every service of the Docker host listening on all addresses through the
// network's gateway address.
func (l *Launcher) checkNetwork(ctx context.Context, name string) error {
	if name == "none" {
		return nil
	}
	res, err := l.docker.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspecting network %s: %w", name, err)
	}
	n := res.Network
	switch {
	case !n.Internal:
		return fmt.Errorf("network %s is not internal (it has a route out)", name)
	case n.Driver != "bridge":
		return fmt.Errorf("network %s uses driver %q; only internal bridge networks are checked", name, n.Driver)
	case n.Options[InhibitIPv4] != "true":
		return fmt.Errorf("network %s gives the Docker host an address on it (create it with -o %s=true)", name, InhibitIPv4)
	}
	return nil
}

// create creates the container, waiting while the previous run's
// container (removed on exit) still holds the name.
func (l *Launcher) create(ctx context.Context, spec client.ContainerCreateOptions) (client.ContainerCreateResult, error) {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		created, err := l.docker.ContainerCreate(ctx, spec)
		if err == nil || !cerrdefs.IsConflict(err) {
			return created, err
		}
		select {
		case <-ctx.Done():
			return created, err
		case <-time.After(wait):
		}
	}
}

// pump copies the gateway's bytes to the container's stdin and the
// container's stdout back; stderr goes to the log. It returns when the
// container's output ends or the gateway hangs up.
func (l *Launcher) pump(log *slog.Logger, c net.Conn, br *bufio.Reader, hj client.HijackedResponse) {
	defer hj.Close()
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		pr, pw := io.Pipe()
		go logLines(log, pr)
		_, err := stdcopy.StdCopy(c, pw, hj.Reader)
		_ = pw.CloseWithError(err)
	}()
	inDone := make(chan struct{})
	go func() {
		defer close(inDone)
		_, _ = io.Copy(hj.Conn, br)
		// The gateway closed its side: close the server's stdin.
		_ = hj.CloseWrite()
	}()
	select {
	case <-outDone:
	case <-inDone:
		select {
		case <-outDone:
		case <-time.After(3 * time.Second):
		}
	}
	_ = c.Close()
}

// stop removes server name's container (by name: also one a previous
// launcher left).
func (l *Launcher) stop(ctx context.Context, name string) error {
	l.mu.Lock()
	delete(l.running, name)
	l.mu.Unlock()
	_, err := l.docker.ContainerRemove(ctx, ContainerName(name), client.ContainerRemoveOptions{Force: true})
	if err != nil && !isNotFound(err) && !cerrdefs.IsConflict(err) { // conflict: already being removed
		return fmt.Errorf("removing the container: %w", err)
	}
	return nil
}

// remove forgets and removes container id of server name.
func (l *Launcher) remove(name, id string) {
	l.mu.Lock()
	if l.running[name] == id {
		delete(l.running, name)
	}
	l.mu.Unlock()
	l.forceRemove(id)
}

func (l *Launcher) forceRemove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := l.docker.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !isNotFound(err) && !cerrdefs.IsConflict(err) {
		l.log.Warn("launcher: removing a container failed", "container", shortID(id), "err", err)
	}
}

func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// readLine reads one line of at most max bytes (without the newline).
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) || len(line) > max+1 {
		return nil, errors.New("request line too long")
	}
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(line[:len(line)-1], []byte("\r")), nil
}

func writeReply(w io.Writer, r Reply) bool {
	b, err := json.Marshal(r)
	if err != nil {
		return false
	}
	_, err = w.Write(append(b, '\n'))
	return err == nil
}

// logLines logs r line by line, each cut to maxStderrLine.
func logLines(log *slog.Logger, r io.Reader) {
	br := bufio.NewReaderSize(r, maxStderrLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			log.Info("server stderr", "line", string(bytes.TrimRight(line, "\r\n")))
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			_, _ = io.Copy(io.Discard, r)
			return
		}
	}
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
