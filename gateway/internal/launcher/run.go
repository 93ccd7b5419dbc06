package launcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"

	"github.com/moby/moby/client"
)

// Run loads the configuration at path, connects to Docker (DOCKER_HOST or
// the default socket) and serves on the configured unix socket until ctx
// ends.
func Run(ctx context.Context, path string, log *slog.Logger) error {
	cfg, err := LoadConfig(path)
	if err != nil {
		return err
	}
	tok, err := ReadToken(cfg.TokenFile)
	if err != nil {
		return fmt.Errorf("starting launcher: %w", err)
	}
	d, err := client.New(client.FromEnv)
	if err != nil {
		return fmt.Errorf("starting launcher: connecting to Docker: %w", err)
	}
	defer d.Close()
	l, err := New(cfg, tok, d, log)
	if err != nil {
		return err
	}
	ln, err := Listen(cfg.Socket)
	if err != nil {
		return fmt.Errorf("starting launcher: %w", err)
	}
	if cfg.SocketGID != nil {
		if err := os.Chown(cfg.Socket, -1, *cfg.SocketGID); err != nil {
			_ = ln.Close()
			return fmt.Errorf("starting launcher: giving the socket to group %d: %w", *cfg.SocketGID, err)
		}
	}
	log.Info("launcher: listening", "socket", cfg.Socket, "servers", len(cfg.Servers))
	return l.Serve(ctx, ln)
}

// Listen listens on a unix socket at path, replacing a stale socket (never
// another kind of file), readable and writable by owner and group only.
func Listen(path string) (net.Listener, error) {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("listening on %s: a file that is not a socket is in the way", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listening on %s: removing the stale socket: %w", path, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	return ln, nil
}
