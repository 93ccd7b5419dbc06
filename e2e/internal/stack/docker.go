package stack

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// Labels on every container, network and volume the suite creates, so that
// leftovers of a killed run can be found (`make clean` removes them).
const (
	LabelRun = "dev.ironcurtain.e2e"     // value: the run id
	LabelPID = "dev.ironcurtain.e2e.pid" // value: the test process id
)

// ExecResult is what a command run in a container did.
type ExecResult struct {
	Code   int
	Stdout string
	Stderr string
}

// String summarises the result for test failure messages.
func (r ExecResult) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s\n--- stderr\n%s", r.Code, r.Stdout, r.Stderr)
}

// execIn runs cmd in a running container with extra environment
// variables and optional stdin, and waits for it.
func execIn(ctx context.Context, cli *client.Client, id string, cmd, env []string, stdin []byte) (ExecResult, error) {
	created, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		AttachStdout: true, AttachStderr: true, AttachStdin: stdin != nil, Env: env, Cmd: cmd,
	})
	if err != nil {
		return ExecResult{}, fmt.Errorf("creating exec %q: %w", cmd[0], err)
	}
	att, err := cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return ExecResult{}, fmt.Errorf("attaching exec %q: %w", cmd[0], err)
	}
	defer att.Close()
	if stdin != nil {
		go func() {
			_, _ = att.Conn.Write(stdin)
			_ = att.CloseWrite()
		}()
	}
	var out, errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(&out, &errb, att.Reader)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, io.EOF) {
			return ExecResult{}, fmt.Errorf("reading exec %q output: %w", cmd[0], err)
		}
	case <-ctx.Done():
		return ExecResult{Stdout: out.String(), Stderr: errb.String()}, fmt.Errorf("exec %q: %w", cmd[0], ctx.Err())
	}
	// The daemon marks the exec finished shortly after closing the stream.
	for {
		ins, err := cli.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
		if err != nil {
			return ExecResult{}, fmt.Errorf("inspecting exec %q: %w", cmd[0], err)
		}
		if !ins.Running {
			return ExecResult{Code: ins.ExitCode, Stdout: out.String(), Stderr: errb.String()}, nil
		}
		if err := sleep(ctx, pollShort); err != nil {
			return ExecResult{}, err
		}
	}
}

// pathsIn lists the entries of the tar archive of path in a container
// (names relative to path's parent), or nil when path does not exist.
func pathsIn(ctx context.Context, cli *client.Client, id, path string) ([]string, error) {
	res, err := cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		if notFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("copying %s from the container: %w", path, err)
	}
	defer res.Content.Close()
	var names []string
	tr := tar.NewReader(res.Content)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the archive of %s: %w", path, err)
		}
		names = append(names, h.Name)
	}
}

// fileIn returns the content of one regular file in a container, or
// os.ErrNotExist.
func fileIn(ctx context.Context, cli *client.Client, id, path string) ([]byte, error) {
	res, err := cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		if notFound(err) {
			return nil, fmt.Errorf("%s: %w", path, os.ErrNotExist)
		}
		return nil, fmt.Errorf("copying %s from the container: %w", path, err)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	h, err := tr.Next()
	if err != nil {
		return nil, fmt.Errorf("reading the archive of %s: %w", path, err)
	}
	if h.Typeflag != tar.TypeReg {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(tr, 64<<20))
}

// notFound reports whether the daemon said a path does not exist.
func notFound(err error) bool {
	if cerrdefs.IsNotFound(err) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "no such file") || strings.Contains(msg, "could not find the file")
}

// ScanResult is where a secret was found in a container's filesystem.
type ScanResult struct {
	Path   string
	Secret string // the secret's name, never its value
}

// scanExport streams the whole filesystem of a container (docker export:
// every file, whatever its permissions; mounted volumes excluded) and
// reports every file containing one of the secrets (name → value).
func scanExport(ctx context.Context, cli *client.Client, id string, secrets map[string]string) (files int, found []ScanResult, err error) {
	rc, err := cli.ContainerExport(ctx, id, client.ContainerExportOptions{})
	if err != nil {
		return 0, nil, fmt.Errorf("exporting the container filesystem: %w", err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var buf bytes.Buffer
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, found, nil
		}
		if err != nil {
			return files, found, fmt.Errorf("reading the container export: %w", err)
		}
		for name, v := range secrets {
			// A secret in a file name or symlink target counts too.
			if strings.Contains(h.Name, v) || strings.Contains(h.Linkname, v) {
				found = append(found, ScanResult{Path: h.Name, Secret: name})
			}
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		files++
		buf.Reset()
		if _, err := io.Copy(&buf, tr); err != nil {
			return files, found, fmt.Errorf("reading %s from the export: %w", h.Name, err)
		}
		for name, v := range secrets {
			if bytes.Contains(buf.Bytes(), []byte(v)) {
				found = append(found, ScanResult{Path: h.Name, Secret: name})
			}
		}
	}
}

// ReapLeftovers removes containers, networks and volumes of earlier runs
// whose test process is gone (a run killed by a timeout never cleaned up).
func ReapLeftovers(ctx context.Context, cli *client.Client) {
	filter := make(client.Filters).Add("label", LabelRun)
	stale := func(labels map[string]string) bool {
		pid, err := strconv.Atoi(labels[LabelPID])
		return err == nil && pid > 0 && !processAlive(pid)
	}
	if list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter}); err == nil {
		for _, c := range list.Items {
			if stale(c.Labels) {
				_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			}
		}
	}
	if list, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: filter}); err == nil {
		for _, n := range list.Items {
			if stale(n.Labels) {
				_, _ = cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			}
		}
	}
	if list, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: filter}); err == nil {
		for _, v := range list.Items {
			if stale(v.Labels) {
				_, _ = cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
			}
		}
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
