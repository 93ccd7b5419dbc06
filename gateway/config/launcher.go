package config

import (
	"errors"
	"path/filepath"
)

// LauncherConfig is the launcher section: how the gateway reaches the
// container launcher that runs its image: servers (docs/tools.md). The
// gateway never holds the Docker socket.
//
//	launcher:
//	  socket: /run/ironcurtain-launcher/launcher.sock
//	  token_file: /run/secrets/launcher-token
type LauncherConfig struct {
	// Socket is the launcher's unix socket.
	Socket string `yaml:"socket"`
	// TokenFile holds the token shared with the launcher.
	TokenFile string `yaml:"token_file"`
}

// Validate implements Validator.
func (l *LauncherConfig) Validate() error {
	var errs []error
	if l.Socket != "" && !filepath.IsAbs(l.Socket) {
		errs = append(errs, &FieldError{Field: "socket", Err: errors.New("must be an absolute path")})
	}
	if l.TokenFile != "" && !filepath.IsAbs(l.TokenFile) {
		errs = append(errs, &FieldError{Field: "token_file", Err: errors.New("must be an absolute path")})
	}
	if (l.Socket == "") != (l.TokenFile == "") {
		errs = append(errs, &FieldError{Field: "token_file", Err: errors.New("socket and token_file are set together")})
	}
	return errors.Join(errs...)
}

// imageErrors: image servers need the launcher section.
func (c *Config) imageErrors() []*FieldError {
	if len(c.ImageServers()) > 0 && c.Launcher.Socket == "" {
		return []*FieldError{{Field: "launcher.socket", Err: errors.New("is required when a server has an image")}}
	}
	return nil
}
