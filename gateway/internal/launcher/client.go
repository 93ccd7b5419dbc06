package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Client is the gateway's side: it asks the launcher to start, attach or
// stop a server by name.
type Client struct {
	// Socket is the launcher's unix socket.
	Socket string
	// Token is the shared token.
	Token []byte
}

// Stream is a server's stdio over the launcher connection: Read is its
// stdout, Write its stdin; Close ends the run.
type Stream struct {
	net.Conn
	r *bufio.Reader
	// Image is the image the launcher runs.
	Image string
}

func (s *Stream) Read(p []byte) (int, error) { return s.r.Read(p) }

// CloseWrite closes the server's stdin.
func (s *Stream) CloseWrite() error {
	if cw, ok := s.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return s.Conn.Close()
}

// ErrRefused is returned when the launcher refuses a request.
var ErrRefused = errors.New("the launcher refused the request")

// Start starts server name and returns its stdio.
func (c *Client) Start(ctx context.Context, name string) (*Stream, error) {
	return c.stream(ctx, OpStart, name)
}

// Attach attaches to the running server name.
func (c *Client) Attach(ctx context.Context, name string) (*Stream, error) {
	return c.stream(ctx, OpAttach, name)
}

// Stop stops server name.
func (c *Client) Stop(ctx context.Context, name string) error {
	s, err := c.do(ctx, OpStop, name)
	if err != nil {
		return err
	}
	return s.Close()
}

func (c *Client) stream(ctx context.Context, op, name string) (*Stream, error) {
	return c.do(ctx, op, name)
}

func (c *Client) do(ctx context.Context, op, name string) (*Stream, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return nil, fmt.Errorf("dialling the launcher: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	b, err := json.Marshal(Request{Op: op, Server: name, Token: string(c.Token)})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	if _, err := conn.Write(append(b, '\n')); err != nil {
		conn.Close()
		return nil, fmt.Errorf("sending the request: %w", err)
	}
	br := bufio.NewReader(conn)
	line, err := readLine(br, 4096)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("reading the launcher's reply: %w", err)
	}
	var rep Reply
	if err := json.Unmarshal(line, &rep); err != nil {
		conn.Close()
		return nil, fmt.Errorf("reading the launcher's reply: %w", err)
	}
	if !rep.OK {
		conn.Close()
		return nil, fmt.Errorf("%w: %s %s: %s", ErrRefused, op, name, rep.Error)
	}
	if !stop() {
		conn.Close()
		return nil, ctx.Err()
	}
	return &Stream{Conn: conn, r: br, Image: rep.Image}, nil
}

var _ io.ReadWriteCloser = (*Stream)(nil)

// Launcher returns the start function of external.Config for server name:
// each call starts the container and checks that the launcher runs the
// image gateway.yaml names for it.
func (c *Client) Launcher(name, image string) func(ctx context.Context) (io.ReadWriteCloser, error) {
	return func(ctx context.Context) (io.ReadWriteCloser, error) {
		s, err := c.Start(ctx, name)
		if err != nil {
			return nil, err
		}
		if s.Image != image {
			_ = s.Close()
			return nil, fmt.Errorf("the launcher runs image %q for %s, but gateway.yaml names %q", s.Image, name, image)
		}
		return s, nil
	}
}
