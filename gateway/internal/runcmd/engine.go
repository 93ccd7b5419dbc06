package runcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// Engine is Docker through the Engine API (the user's own Docker access:
// DOCKER_HOST or the default socket; the gateway gains no socket).
type Engine struct {
	C *client.Client
}

var _ Docker = Engine{}

// NewEngine connects to the Docker Engine named by the environment.
func NewEngine() (Engine, error) {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return Engine{}, fmt.Errorf("connecting to Docker: %w", err)
	}
	return Engine{C: c}, nil
}

// CheckNetwork implements Docker.
func (e Engine) CheckNetwork(ctx context.Context, name string) error {
	_, err := e.C.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	return err
}

// CheckImage implements Docker.
func (e Engine) CheckImage(ctx context.Context, image string) error {
	_, err := e.C.ImageInspect(ctx, image)
	return err
}

// BuildConfig is the container of s: the agent network only, a read-only
// root, no capabilities, no new privileges, /tmp as tmpfs, the workspace
// read-only, its own output only through the attach stream.
func BuildConfig(s Spec) client.ContainerCreateOptions {
	var mounts []mount.Mount
	if s.Workspace != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: s.Workspace, Target: "/workspace", ReadOnly: true,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}})
	}
	if s.TokenFile != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: s.TokenFile, Target: TokenPath, ReadOnly: true,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}})
	}
	pids := int64(512)
	cfg := &container.Config{
		Image:        s.Image,
		Cmd:          append([]string(nil), s.Cmd...),
		Env:          append([]string(nil), s.Env...),
		Labels:       s.Labels,
		AttachStdout: true,
		AttachStderr: true,
		AttachStdin:  s.Stdin,
		OpenStdin:    s.Stdin,
		StdinOnce:    s.Stdin,
	}
	useInit := true
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(s.Network),
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges:true"},
		IpcMode:        container.IPCModePrivate,
		Init:           &useInit,
		Tmpfs:          map[string]string{"/tmp": "rw,nosuid,nodev,size=256m"},
		Mounts:         mounts,
		Resources:      container.Resources{PidsLimit: &pids},
	}
	return client.ContainerCreateOptions{Name: s.Name, Config: cfg, HostConfig: hc}
}

// Start implements Docker: create, attach, start. On an error after the
// create the id is returned so the caller removes the container.
func (e Engine) Start(ctx context.Context, s Spec) (string, Stream, error) {
	created, err := e.C.ContainerCreate(ctx, BuildConfig(s))
	if err != nil {
		return "", Stream{}, fmt.Errorf("creating: %w", err)
	}
	id := created.ID
	st, err := e.Attach(ctx, id, s.Stdin)
	if err != nil {
		return id, Stream{}, err
	}
	if _, err := e.C.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		st.Close()
		return id, Stream{}, fmt.Errorf("starting: %w", err)
	}
	return id, st, nil
}

// Attach implements Docker.
func (e Engine) Attach(ctx context.Context, id string, stdin bool) (Stream, error) {
	hj, err := e.C.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: stdin, Stdout: true, Stderr: true})
	if err != nil {
		return Stream{}, fmt.Errorf("attaching: %w", err)
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, pw, hj.Reader)
		_ = pw.CloseWithError(err)
	}()
	st := Stream{Output: pr, Close: func() { hj.Close(); _ = pr.Close() }}
	if stdin {
		st.Input = hijackedInput{hj.HijackedResponse}
	}
	return st, nil
}

type hijackedInput struct{ hj client.HijackedResponse }

func (h hijackedInput) Write(p []byte) (int, error) { return h.hj.Conn.Write(p) }
func (h hijackedInput) Close() error                { return h.hj.CloseWrite() }

// Find implements Docker.
func (e Engine) Find(ctx context.Context, session string) (string, map[string]string, error) {
	res, err := e.C.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelSession+"="+session)})
	if err != nil {
		return "", nil, err
	}
	if len(res.Items) == 0 {
		return "", nil, nil
	}
	return res.Items[0].ID, res.Items[0].Labels, nil
}

// Wait implements Docker.
func (e Engine) Wait(ctx context.Context, id string) (int64, error) {
	w := e.C.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case r := <-w.Result:
		if r.Error != nil && r.Error.Message != "" {
			return r.StatusCode, errors.New(r.Error.Message)
		}
		return r.StatusCode, nil
	case err := <-w.Error:
		return -1, err
	}
}

// Stop implements Docker.
func (e Engine) Stop(ctx context.Context, id string, grace time.Duration) error {
	secs := max(int(grace/time.Second), 1)
	_, err := e.C.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs})
	if err != nil && cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// Remove implements Docker.
func (e Engine) Remove(ctx context.Context, id string) error {
	_, err := e.C.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	if err != nil && (cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err)) { // conflict: already being removed
		return nil
	}
	return err
}

// ExecVerifier runs `ironcurtain audit verify --session ID` in the stack's
// gateway container (the workstation does not reach Postgres; the gateway
// container has the database URL), like `make audit` does.
type ExecVerifier struct {
	C *client.Client
	// Project and Service find the container by its compose labels.
	Project, Service string
}

// maxVerifyOutput bounds what is kept of verify's output.
const maxVerifyOutput = 64 << 10

// Verify implements Verifier.
func (v ExecVerifier) Verify(ctx context.Context, session string) (string, error) {
	f := client.Filters{}.Add("label", "com.docker.compose.project="+v.Project, "com.docker.compose.service="+v.Service)
	res, err := v.C.ContainerList(ctx, client.ContainerListOptions{Filters: f})
	if err != nil {
		return "", fmt.Errorf("%w: finding the gateway container: %v", ErrNotVerified, err)
	}
	if len(res.Items) == 0 {
		return "", fmt.Errorf("%w: no running %s container of compose project %s", ErrNotVerified, v.Service, v.Project)
	}
	ex, err := v.C.ExecCreate(ctx, res.Items[0].ID, client.ExecCreateOptions{
		Cmd: verifyCmd(session), AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", fmt.Errorf("exec: %w", err)
	}
	hj, err := v.C.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return "", fmt.Errorf("exec: %w", err)
	}
	var out bytes.Buffer
	_, err = stdcopy.StdCopy(&limited{&out}, &limited{&out}, hj.Reader)
	hj.Close()
	if err != nil {
		return "", fmt.Errorf("exec: %w", err)
	}
	in, err := v.C.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("exec: %w", err)
	}
	text := visible(strings.Join(strings.Fields(out.String()), " "))
	if in.ExitCode != 0 {
		return "", fmt.Errorf("audit verify exited %d: %s", in.ExitCode, text)
	}
	return text, nil
}

// DatabaseURLFile is the compose gateway's database URL secret: its
// environment holds no URL (compose secrets are files).
const DatabaseURLFile = "/run/secrets/database_url"

// verifyCmd is `ironcurtain audit verify --session session` in the gateway
// container, its database URL read there from DatabaseURLFile unless the
// container's environment sets IRONCURTAIN_DATABASE_URL (never on a
// command line: the shell reads it), as compose/stack.sh does.
func verifyCmd(session string) []string {
	return []string{"/bin/sh", "-c", `if [ -z "${IRONCURTAIN_DATABASE_URL:-}" ] && [ -r ` + DatabaseURLFile + ` ]; then ` +
		`IRONCURTAIN_DATABASE_URL=$(cat ` + DatabaseURLFile + `) && export IRONCURTAIN_DATABASE_URL; fi; ` +
		`exec ironcurtain audit verify --session "$1"`, "ironcurtain", session}
}

type limited struct{ b *bytes.Buffer }

func (l *limited) Write(p []byte) (int, error) {
	if room := maxVerifyOutput - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
