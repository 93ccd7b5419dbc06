package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"ironcurtain.dev/gateway/internal/testenv"
)

func TestRunCommandErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string
	}{
		{"no operator token", []string{"run", "task"}, nil, 2, "IRONCURTAIN_OPERATOR_TOKEN: missing"},
		{"ttl out of range", []string{"run", "--ttl", "10s", "task"}, map[string]string{"IRONCURTAIN_OPERATOR_TOKEN": "t"}, 2, "--ttl: 10s is out of range"},
		{"no task", []string{"run"}, map[string]string{"IRONCURTAIN_OPERATOR_TOKEN": "t"}, 2, "want exactly one task"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), env{args: c.args, getenv: func(k string) string { return c.env[k] },
				stdin: strings.NewReader(""), stdout: &out, stderr: &errb})
			if code != c.code || !strings.Contains(errb.String(), c.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errb.String(), c.code, c.want)
			}
		})
	}
}

// TestRunCommandNoStack: with Docker but without the stack's network the
// run says so and mints nothing (the ops URL points nowhere).
func TestRunCommandNoStack(t *testing.T) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		testenv.Missing(t, "no Docker client: %v", err)
	}
	defer cli.Close()
	if _, err := cli.Ping(context.Background(), client.PingOptions{}); err != nil {
		testenv.Missing(t, "Docker does not answer: %v", err)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), env{args: []string{"run", "--network", "ironcurtain-test-no-such-net", "--ops-url", "http://127.0.0.1:1", "task"},
		getenv: func(k string) string { return map[string]string{"IRONCURTAIN_OPERATOR_TOKEN": "t"}[k] },
		stdin:  strings.NewReader(""), stdout: &out, stderr: &errb})
	if code != 1 || !strings.Contains(errb.String(), "no stack running: network ironcurtain-test-no-such-net") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
