package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a proxy process.
type proc struct {
	target
	cmd *exec.Cmd
	log *os.File
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	_ = p.log.Close()
}

// startProxies starts ours, and a baseline build of ours, the bare relay, smokescreen and Squid when
// configured, each on a free loopback port, and waits until each accepts
// connections.
func startProxies(o options, self string, upPort, rep int) ([]*proc, error) {
	var procs []*proc
	fail := func(err error) ([]*proc, error) {
		for _, p := range procs {
			p.stop()
		}
		return nil, err
	}
	start := func(name string, cmd *exec.Cmd, addr string) error {
		lf, err := os.Create(filepath.Join(o.dir, fmt.Sprintf("%s-%d.log", name, rep)))
		if err != nil {
			return err
		}
		cmd.Stdout, cmd.Stderr = lf, lf
		if err := cmd.Start(); err != nil {
			lf.Close()
			return fmt.Errorf("starting %s: %w", name, err)
		}
		p := &proc{target: target{name: name, proxy: addr, pid: cmd.Process.Pid}, cmd: cmd, log: lf}
		procs = append(procs, p)
		if err := waitListening(addr, 20*time.Second); err != nil {
			return fmt.Errorf("%s did not start (log %s): %w", name, lf.Name(), err)
		}
		return nil
	}
	addr, err := freeAddr()
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(self, "ours", "-listen", addr, "-port", strconv.Itoa(upPort),
		"-audit", filepath.Join(o.dir, fmt.Sprintf("ours-audit-%d.jsonl", rep)))
	if err := start("ours", cmd, addr); err != nil {
		return fail(err)
	}
	if o.baseline != "" {
		addr, err := freeAddr()
		if err != nil {
			return fail(err)
		}
		cmd := exec.Command(o.baseline, "ours", "-listen", addr, "-port", strconv.Itoa(upPort),
			"-audit", filepath.Join(o.dir, fmt.Sprintf("base-audit-%d.jsonl", rep)))
		if err := start("base", cmd, addr); err != nil {
			return fail(err)
		}
	}
	if o.bare {
		addr, err := freeAddr()
		if err != nil {
			return fail(err)
		}
		if err := start("bare", exec.Command(self, "bare", "-listen", addr), addr); err != nil {
			return fail(err)
		}
	}
	if o.smokescreen != "" {
		addr, err := freeAddr()
		if err != nil {
			return fail(err)
		}
		_, port, _ := net.SplitHostPort(addr)
		cmd := exec.Command(o.smokescreen, "--listen-ip", "127.0.0.1", "--listen-port", port, "--allow-range", "127.0.0.0/8")
		if err := start("smokescreen", cmd, addr); err != nil {
			return fail(err)
		}
	}
	if o.squid != "" {
		addr, err := freeAddr()
		if err != nil {
			return fail(err)
		}
		conf, err := squidConf(o.dir, addr, rep)
		if err != nil {
			return fail(err)
		}
		if err := start("squid", exec.Command(o.squid, "-N", "-f", conf), addr); err != nil {
			return fail(err)
		}
	}
	return procs, nil
}

// squidConf writes a Squid configuration that relays CONNECT to any port
// from loopback, caches nothing, logs each request (as the others do) and
// may hold enough descriptors for the idle-tunnel run.
func squidConf(dir, addr string, rep int) (string, error) {
	sd := filepath.Join(dir, fmt.Sprintf("squid-%d", rep))
	if err := os.MkdirAll(sd, 0o777); err != nil {
		return "", err
	}
	_ = os.Chmod(sd, 0o777) // Squid started as root runs as its own user
	_ = os.Chmod(dir, 0o755)
	lines := []string{
		"http_port " + addr,
		"http_access allow localhost",
		"http_access deny all",
		"cache deny all",
		"cache_mem 8 MB",
		"access_log stdio:" + filepath.Join(sd, "access.log"),
		"cache_log " + filepath.Join(sd, "cache.log"),
		"pid_filename " + filepath.Join(sd, "squid.pid"),
		"coredump_dir " + sd,
		"max_filedescriptors 65536",
		"shutdown_lifetime 0 seconds",
		"client_lifetime 1 hour",
		"read_timeout 10 minutes",
	}
	path := filepath.Join(sd, "squid.conf")
	return path, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitListening(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			abort(c)
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rssKiB is the resident set of process pid (VmRSS in /proc, KiB).
func rssKiB(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		}
	}
	return 0, errors.New("no VmRSS for process " + strconv.Itoa(pid))
}

// procCPU is the CPU time process pid has used, user and system, all its
// threads (utime + stime in /proc/PID/stat, in USER_HZ ticks: 10 ms on
// Linux); 0 for pid 0 or when it cannot be read.
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it start behind the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 { // f[0] is field 3 (state); utime and stime are fields 14 and 15
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}
