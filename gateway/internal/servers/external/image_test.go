package external

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// childStream runs the test server as a process and exposes its stdio as
// the launcher's connection would: Read is stdout, Write stdin, CloseWrite
// ends stdin, Close ends the run.
type childStream struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out io.Reader
}

func (c *childStream) Read(p []byte) (int, error)  { return c.out.Read(p) }
func (c *childStream) Write(p []byte) (int, error) { return c.in.Write(p) }
func (c *childStream) CloseWrite() error           { return c.in.Close() }
func (c *childStream) Close() error {
	_ = c.in.Close()
	_ = c.cmd.Process.Kill()
	return nil
}

func fakeLaunch(t *testing.T, runs *atomic.Int32) func(context.Context) (io.ReadWriteCloser, error) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) (io.ReadWriteCloser, error) {
		runs.Add(1)
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = []string{modeVar + "=serve"}
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		go func() { _ = cmd.Wait() }()
		return &childStream{cmd: cmd, in: in, out: out}, nil
	}
}

// TestImageMode: a server whose stdio comes from the launcher is listed,
// called, restarted with back-off when it dies, and stopped when it floods
// stdout past the line cap, through the same code as command mode.
func TestImageMode(t *testing.T) {
	var runs atomic.Int32
	logs := &syncBuf{}
	s, err := Start(context.Background(), Config{
		Name: "notes", Launch: fakeLaunch(t, &runs), MaxLineBytes: 1 << 20,
		StartTimeout: 20 * time.Second, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	}, Deps{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if n := len(s.Tools()); n != 9 {
		t.Fatalf("tools = %d, want 9", n)
	}
	res, err := call(t, s, "echo", map[string]any{"text": "hi"})
	if err != nil || text(res) != "hi" {
		t.Fatalf("echo = %+v, %v", res, err)
	}
	waitEcho := func(wantRuns int32) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			res, err := call(t, s, "echo", map[string]any{"text": "again"})
			if err == nil && text(res) == "again" && runs.Load() >= wantRuns {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no restart: runs %d, last %+v %v\nlogs: %s", runs.Load(), res, err, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if _, err := call(t, s, "crash", map[string]any{}); err == nil {
		t.Fatal("crash returned no error")
	}
	waitEcho(2)
	// A 2 MiB line against a 1 MiB cap ends the run; it is restarted.
	if _, err := call(t, s, "flood", map[string]any{}); err == nil {
		t.Fatal("flood returned no error")
	}
	waitEcho(3)
	if !strings.Contains(logs.String(), "longer than the limit") {
		t.Errorf("the flood was not logged: %s", logs.String())
	}
}

func TestLineLimiter(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		over bool
	}{
		{"short lines", "ab\ncd\n", 2, false},
		{"exactly max", "abc\n", 3, false},
		{"over", "abcd\n", 3, true},
		{"over without newline", "abcdefgh", 3, true},
		{"many short", strings.Repeat("a\n", 1000), 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			l := &lineLimiter{r: strings.NewReader(tt.in), max: tt.max, over: func() { called = true }}
			_, err := io.ReadAll(l)
			if (err != nil) != tt.over || called != tt.over {
				t.Errorf("err = %v, over called %v; want over %v", err, called, tt.over)
			}
		})
	}
}

// FuzzLineLimiter: the limiter fails exactly when some line (the bytes
// between newlines) is longer than max, whatever the read sizes.
func FuzzLineLimiter(f *testing.F) {
	f.Add([]byte("ab\ncd\n"), uint8(2), uint8(1))
	f.Add([]byte("abcd\nx"), uint8(3), uint8(7))
	f.Fuzz(func(t *testing.T, in []byte, max, chunk uint8) {
		m := int(max)
		want := false
		for _, line := range strings.Split(string(in), "\n") {
			want = want || len(line) > m
		}
		l := &lineLimiter{r: &chunkReader{b: in, n: int(chunk%16) + 1}, max: m, over: func() {}}
		_, err := io.ReadAll(l)
		if (err != nil) != want {
			t.Fatalf("in %q max %d chunk %d: err %v, want over %v", in, m, chunk, err, want)
		}
	})
}

type chunkReader struct {
	b []byte
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[n:]
	return n, nil
}
