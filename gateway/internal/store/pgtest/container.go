package pgtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// startServer starts the Postgres container and waits until it answers.
func startServer(ctx context.Context) (*Server, error) {
	if _, set := os.LookupEnv(EnvRyuk); !set {
		// The reaper image cannot be pulled here; we clean up ourselves.
		_ = os.Setenv(EnvRyuk, "true")
	}
	image := os.Getenv(EnvImage)
	if image == "" {
		image = DefaultImage
	}
	reapLeftovers(ctx)

	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("choosing a host port: %w", err)
		}
		ctr, err := runContainer(ctx, image, port)
		if err != nil {
			lastErr = err
			if ctx.Err() != nil {
				break
			}
			continue // most likely the port was taken in between: retry
		}
		srv := &Server{image: image, host: "127.0.0.1", port: port, ctr: ctr}
		if err := srv.waitReady(ctx); err != nil {
			_ = ctr.Terminate(context.Background())
			return nil, err
		}
		return srv, nil
	}
	return nil, lastErr
}

// pgdata is the data directory inside the container (the official image's).
const pgdata = "/var/lib/postgresql/data"

// runContainer starts image with the Postgres port bound to a fixed host
// port, so that Stop/Start keeps the server's address.
func runContainer(ctx context.Context, image, hostPort string) (*tcContainer, error) {
	ctr, err := testcontainers.Run(ctx, image,
		testcontainers.WithEnv(map[string]string{
			"POSTGRES_USER":     user,
			"POSTGRES_PASSWORD": password,
			"POSTGRES_DB":       adminDB,
			"PGDATA":            pgdata,
		}),
		testcontainers.WithExposedPorts("5432/tcp"),
		testcontainers.WithLabels(map[string]string{
			LabelKey: "1",
			LabelPID: strconv.Itoa(os.Getpid()),
		}),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{
				network.MustParsePort("5432/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: hostPort}},
			}
			// An anonymous volume: the data directory bypasses the storage
			// driver (fuse-overlayfs here is slow, and fsync through it is
			// not what a deployment sees), survives Stop/Start, and is
			// removed with the container.
			hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeVolume, Target: pgdata})
		}),
	)
	if err != nil {
		if ctr != nil {
			_ = ctr.Terminate(context.Background())
		}
		return nil, fmt.Errorf("starting container from %s: %w", image, err)
	}
	return &tcContainer{c: ctr}, nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// reapLeftovers removes harness containers whose owning test process is
// gone (a test binary killed by a timeout never ran Main's cleanup).
// Best effort: errors are ignored, the run goes on.
func reapLeftovers(ctx context.Context) {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return
	}
	defer cli.Close()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelKey),
	})
	if err != nil {
		return
	}
	for _, c := range list.Items {
		pid, err := strconv.Atoi(c.Labels[LabelPID])
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// tcContainer adapts a testcontainers container to runner.
type tcContainer struct {
	c *testcontainers.DockerContainer
}

func (t *tcContainer) Stop(ctx context.Context, timeout *time.Duration) error {
	return t.c.Stop(ctx, timeout)
}

func (t *tcContainer) Start(ctx context.Context) error { return t.c.Start(ctx) }

func (t *tcContainer) Terminate(ctx context.Context) error { return t.c.Terminate(ctx) }

func (t *tcContainer) Running(ctx context.Context) (bool, error) {
	st, err := t.c.State(ctx)
	if err != nil {
		return false, err
	}
	return st.Running, nil
}

func (t *tcContainer) Logs(ctx context.Context) (string, error) {
	rc, err := t.c.Logs(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	return string(b), err
}
