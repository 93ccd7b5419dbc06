package launcher

import (
	"bufio"
	"context"
	"encoding/binary"

	"io"
	"net"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// fakeDocker records what the launcher asks for; an attached "container"
// echoes each stdin line to stdout and writes "err: <line>" to stderr.
type fakeDocker struct {
	mu         sync.Mutex
	creates    []client.ContainerCreateOptions
	starts     []string
	removes    []string
	failCreate error
	// networks are the networks the fake knows (name → inspect).
	networks map[string]network.Inspect
}

func (f *fakeDocker) NetworkInspect(_ context.Context, id string, _ client.NetworkInspectOptions) (client.NetworkInspectResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.networks[id]
	if !ok {
		return client.NetworkInspectResult{}, cerrdefs.ErrNotFound.WithMessage("no such network")
	}
	return client.NetworkInspectResult{Network: n}, nil
}

// safeNetwork is an internal bridge network without a host address.
func safeNetwork() network.Inspect {
	var n network.Inspect
	n.Driver, n.Internal, n.Options = "bridge", true, map[string]string{InhibitIPv4: "true"}
	return n
}

func (f *fakeDocker) ContainerCreate(_ context.Context, o client.ContainerCreateOptions) (client.ContainerCreateResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failCreate != nil {
		return client.ContainerCreateResult{}, f.failCreate
	}
	f.creates = append(f.creates, o)
	return client.ContainerCreateResult{ID: "c0ffee" + o.Name}, nil
}

func (f *fakeDocker) ContainerAttach(_ context.Context, id string, _ client.ContainerAttachOptions) (client.ContainerAttachResult, error) {
	ours, theirs := net.Pipe()
	go func() {
		defer theirs.Close()
		sc := bufio.NewScanner(theirs)
		for sc.Scan() {
			if frame(theirs, 1, append(sc.Bytes(), '\n')) != nil || frame(theirs, 2, []byte("err: "+sc.Text()+"\n")) != nil {
				return
			}
		}
	}()
	return client.ContainerAttachResult{HijackedResponse: client.NewHijackedResponse(ours, "")}, nil
}

func frame(w io.Writer, stream byte, p []byte) error {
	h := make([]byte, 8)
	h[0] = stream
	binary.BigEndian.PutUint32(h[4:], uint32(len(p)))
	_, err := w.Write(append(h, p...))
	return err
}

func (f *fakeDocker) ContainerStart(_ context.Context, id string, _ client.ContainerStartOptions) (client.ContainerStartResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, id)
	return client.ContainerStartResult{}, nil
}

func (f *fakeDocker) ContainerRemove(_ context.Context, id string, _ client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removes = append(f.removes, id)
	return client.ContainerRemoveResult{}, cerrdefs.ErrNotFound.WithMessage("no such container")
}
