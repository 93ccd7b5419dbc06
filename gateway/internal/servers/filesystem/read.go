package filesystem

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/toolargs"
)

// readTextFile serves read_text_file and the deprecated read_file.
func (s *Server) readTextFile(_ context.Context, a *toolargs.Args) (servers.Result, error) {
	l, err := s.resolveRead(a.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	head, _ := a.Int("head")
	tail, _ := a.Int("tail")
	if head > 0 && tail > 0 {
		return servers.Result{}, &toolError{msg: "cannot specify both head and tail"}
	}
	f, fi, err := l.a.openChecked(l.rel, wantRegular)
	if err != nil {
		return servers.Result{}, failf("reading file", err)
	}
	defer f.Close()
	var text string
	switch {
	case tail > 0:
		text, err = tailLines(f, fi.Size(), int(tail), s.maxRead)
	case head > 0:
		text, err = headLines(f, int(head), s.maxRead)
	default:
		if fi.Size() > s.maxRead {
			return servers.Result{}, &toolError{msg: fmt.Sprintf(
				"file is too large (%d bytes, limit %d); read part of it with head or tail", fi.Size(), s.maxRead)}
		}
		var b []byte
		b, err = readCapped(f, fi.Size(), s.maxRead)
		text = string(b)
	}
	if err != nil {
		return servers.Result{}, err
	}
	return servers.Text(text), nil
}

// readCapped reads a whole file of (claimed) size, refusing more than max
// bytes even if the file grows while it is read.
func readCapped(f *os.File, size, max int64) ([]byte, error) {
	if size > max {
		return nil, tooLarge(size, max)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+1))
	n, err := buf.ReadFrom(io.LimitReader(f, max+1))
	if err != nil {
		return nil, failf("reading file", err)
	}
	if n > max {
		return nil, tooLarge(n, max)
	}
	return buf.Bytes(), nil
}

func tooLarge(size, max int64) error {
	return &toolError{msg: fmt.Sprintf("file is too large (%d bytes, limit %d)", size, max)}
}

// headLines returns the first n lines (without their newlines, CRLF
// normalised), reading at most max bytes.
func headLines(r io.Reader, n int, max int64) (string, error) {
	br := bufio.NewReader(io.LimitReader(r, max+1))
	var out strings.Builder
	var total int64
	for i := 0; i < n; i++ {
		line, err := br.ReadString('\n')
		total += int64(len(line))
		if total > max {
			return "", &toolError{msg: fmt.Sprintf("the requested lines exceed the read limit (%d bytes)", max)}
		}
		if len(line) > 0 {
			if i > 0 {
				out.WriteByte('\n')
			}
			out.WriteString(strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", failf("reading file", err)
		}
	}
	return out.String(), nil
}

// tailLines returns the last n lines of a file of the given size (without
// their newlines, CRLF normalised), reading backwards in chunks and at most
// max bytes.
func tailLines(f io.ReaderAt, size int64, n int, max int64) (string, error) {
	const chunk = 64 << 10
	var buf []byte
	pos := size
	newlines := 0
	for pos > 0 && newlines <= n {
		step := int64(chunk)
		if pos < step {
			step = pos
		}
		if int64(len(buf))+step > max {
			return "", &toolError{msg: fmt.Sprintf("the requested lines exceed the read limit (%d bytes)", max)}
		}
		pos -= step
		part := make([]byte, step)
		m, err := f.ReadAt(part, pos)
		if err != nil && err != io.EOF {
			return "", failf("reading file", err)
		}
		part = part[:m]
		newlines += bytes.Count(part, []byte{'\n'})
		buf = append(part, buf...)
	}
	text := strings.ReplaceAll(string(buf), "\r\n", "\n")
	text = strings.TrimSuffix(text, "\n")
	if text == "" {
		return "", nil
	}
	lines := strings.Split(text, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n"), nil
}

// mediaTypes maps extensions to the MIME types read_media_file serves.
var mediaTypes = map[string]string{
	".png":  "image/png",
	".jpg":  "image/jpeg",
	".jpeg": "image/jpeg",
	".gif":  "image/gif",
	".webp": "image/webp",
	".bmp":  "image/bmp",
	".svg":  "image/svg+xml",
	".mp3":  "audio/mpeg",
	".wav":  "audio/wav",
	".ogg":  "audio/ogg",
	".flac": "audio/flac",
}

// readMediaFile returns an image or audio file as base64 content.
func (s *Server) readMediaFile(_ context.Context, a *toolargs.Args) (servers.Result, error) {
	l, err := s.resolveRead(a.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	mime, ok := mediaTypes[strings.ToLower(path.Ext(l.rel))]
	if !ok {
		return servers.Result{}, &toolError{msg: "not an image or audio file (supported: png, jpg, gif, webp, bmp, svg, mp3, wav, ogg, flac)"}
	}
	f, fi, err := l.a.openChecked(l.rel, wantRegular)
	if err != nil {
		return servers.Result{}, failf("reading file", err)
	}
	defer f.Close()
	data, err := readCapped(f, fi.Size(), s.maxRead)
	if err != nil {
		return servers.Result{}, err
	}
	kind := "image"
	if strings.HasPrefix(mime, "audio/") {
		kind = "audio"
	}
	return servers.Result{Content: []servers.Content{{
		Type:     kind,
		Data:     base64.StdEncoding.EncodeToString(data),
		MIMEType: mime,
	}}}, nil
}

// readMultipleFiles reads several files; a failure on one is reported in
// its place and does not stop the others. The sum of the contents is capped
// by the read limit.
func (s *Server) readMultipleFiles(_ context.Context, a *toolargs.Args) (servers.Result, error) {
	paths := a.Strings("paths")
	if len(paths) == 0 {
		return servers.Result{}, &toolError{msg: "paths must hold at least one path"}
	}
	if len(paths) > maxMultipleFiles {
		return servers.Result{}, &toolError{msg: fmt.Sprintf("too many paths (limit %d)", maxMultipleFiles)}
	}
	budget := s.maxRead
	parts := make([]string, 0, len(paths))
	for i, p := range paths {
		l, err := s.resolveRead(p)
		if err != nil {
			// The raw value may name a host path outside the sandbox.
			parts = append(parts, fmt.Sprintf("paths[%d]: Error - %s", i, safeMessage(err)))
			continue
		}
		label := l.display()
		data, err := readWholeAt(l, budget)
		if err != nil {
			s.log.Warn("filesystem read_multiple_files entry failed", "path", label, "error", err.Error())
			parts = append(parts, fmt.Sprintf("%s: Error - %s", label, safeMessage(err)))
			continue
		}
		budget -= int64(len(data))
		parts = append(parts, label+":\n"+string(data)+"\n")
	}
	return servers.Text(strings.Join(parts, "\n---\n")), nil
}

// readWhole reads the regular file rel of the sandbox, refusing more than
// max bytes.
func (s *Server) readWhole(rel string, max int64) ([]byte, error) {
	return readWholeAt(loc{a: s.sb, rel: rel}, max)
}

// readWholeAt reads the regular file l, refusing more than max bytes.
func readWholeAt(l loc, max int64) ([]byte, error) {
	f, fi, err := l.a.openChecked(l.rel, wantRegular)
	if err != nil {
		return nil, failf("reading file", err)
	}
	defer f.Close()
	if max <= 0 {
		return nil, &toolError{msg: "read limit reached"}
	}
	return readCapped(f, fi.Size(), max)
}
