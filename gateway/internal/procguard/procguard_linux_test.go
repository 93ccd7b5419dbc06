//go:build linux

package procguard

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"ironcurtain.dev/gateway/internal/testenv"
)

// The test re-runs its own binary in two roles: "gateway" (holds a secret in its environment,
// makes itself non-dumpable unless told not to, starts a reader) and "reader" (a child of the
// gateway's uid that tries the gateway's /proc entries and reports what it could open).
const (
	roleEnv   = "PROCGUARD_TEST_ROLE"
	modeEnv   = "PROCGUARD_TEST_MODE" // "guarded" or "control" (no prctl)
	secretEnv = "PROCGUARD_TEST_SECRET"
	nobody    = 65534
)

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "gateway":
		os.Exit(runGateway())
	case "reader":
		os.Exit(runReader())
	}
	os.Exit(m.Run())
}

// runGateway is the process to protect. Its reader child gets an environment without the
// secret, so whatever of it the reader prints came from the parent's /proc.
func runGateway() int {
	if os.Getenv(modeEnv) == "guarded" {
		if err := NonDumpable(); err != nil {
			fmt.Printf("prctl=%v\n", err)
			return 1
		}
		// The gateway's own metrics read /proc/self: they must keep working.
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		if _, err := reg.Gather(); err != nil {
			fmt.Printf("collector=%v\n", err)
		} else {
			fmt.Println("collector=ok")
		}
	}
	d, err := Dumpable()
	fmt.Printf("dumpable=%v %v\n", d, err)
	self, err := os.Executable()
	if err != nil {
		fmt.Printf("executable=%v\n", err)
		return 1
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = []string{roleEnv + "=reader"}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Printf("reader=%v\n", err)
		return 1
	}
	return 0
}

// runReader reports, one line each, what it could read of its parent's /proc entries.
func runReader() int {
	dir := fmt.Sprintf("/proc/%d/", os.Getppid())
	secretSeen := func(b []byte) string {
		if bytes.Contains(b, []byte(secretEnv+"=")) {
			return "read"
		}
		return "read-without-secret"
	}
	if b, err := os.ReadFile(dir + "environ"); err != nil {
		fmt.Printf("environ=denied %v\n", err)
	} else {
		fmt.Printf("environ=%s\n", secretSeen(b))
	}
	if f, err := os.Open(dir + "mem"); err != nil {
		fmt.Printf("mem=denied %v\n", err)
	} else {
		f.Close()
		fmt.Println("mem=read")
	}
	if _, err := os.ReadDir(dir + "fd"); err != nil {
		fmt.Printf("fd=denied %v\n", err)
	} else {
		fmt.Println("fd=read")
	}
	if _, err := os.ReadFile(dir + "cmdline"); err != nil { // what the container healthcheck reads
		fmt.Printf("cmdline=denied %v\n", err)
	} else {
		fmt.Println("cmdline=read")
	}
	return 0
}

// runAs runs the gateway role in mode as an unprivileged uid and returns the reports by key.
// As root it runs as nobody: root (CAP_SYS_PTRACE) reads anyone's /proc, so only an
// unprivileged child shows the property.
func runAs(t *testing.T, bin, mode string) map[string]string {
	t.Helper()
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = []string{roleEnv + "=gateway", modeEnv + "=" + mode, secretEnv + "=" + hex.EncodeToString(secret)}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, NoSetGroups: true}}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil && errors.Is(err, syscall.EPERM) {
		// Root without CAP_SETUID: the property cannot be shown here.
		testenv.Missing(t, "cannot start the gateway role as uid %d: %v", nobody, err)
	}
	if err != nil {
		t.Fatalf("%s gateway: %v\n%s", mode, err, out.String())
	}
	got := map[string]string{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			got[k] = v
		}
	}
	t.Logf("%s: %v", mode, got)
	return got
}

// A child of the gateway's uid must not read the gateway's environment, memory or open files.
// The control run (no prctl) must read the environment, or the test would prove nothing.
func TestChildCannotReadParentProc(t *testing.T) {
	bin := executableCopy(t)
	control := runAs(t, bin, "control")
	if control["environ"] != "read" {
		t.Fatalf("control: a child could not read its dumpable parent's environ (%q): the test proves nothing here", control["environ"])
	}
	if !strings.HasPrefix(control["dumpable"], "true") {
		t.Fatalf("control: the gateway role is not dumpable before prctl: %q", control["dumpable"])
	}
	got := runAs(t, bin, "guarded")
	if !strings.HasPrefix(got["dumpable"], "false") {
		t.Fatalf("the gateway role is still dumpable after NonDumpable: %q", got["dumpable"])
	}
	for _, entry := range []string{"environ", "mem", "fd"} {
		if !strings.HasPrefix(got[entry], "denied") {
			t.Errorf("a child read the non-dumpable parent's /proc/<ppid>/%s: %q", entry, got[entry])
		}
	}
	if got["cmdline"] != "read" {
		t.Errorf("/proc/<ppid>/cmdline (the healthcheck reads it) became unreadable: %q", got["cmdline"])
	}
	if got["collector"] != "ok" {
		t.Errorf("the process metrics collector fails on a non-dumpable process: %q", got["collector"])
	}
}

// executableCopy copies the test binary where an unprivileged uid may run it (go test builds
// it under a directory only its owner may enter).
func executableCopy(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "procguard-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, "procguard.test")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}
