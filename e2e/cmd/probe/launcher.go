package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// launcherExchange is one request sent to the launcher's socket as it
// is, and the reply line it got.
type launcherExchange struct {
	Request string `json:"request"`
	Reply   string `json:"reply"`
	Err     string `json:"err,omitempty"`
}

// launcherCmd sends each line of stdin, on a connection of its own, to
// the launcher's unix socket and reports the reply line (a compromised
// gateway's view: it holds the socket and the token, nothing else).
func launcherCmd(socket string, stdin io.Reader) ([]launcherExchange, error) {
	b, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the requests: %w", err)
	}
	var out []launcherExchange
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		out = append(out, launcherOnce(socket, line))
	}
	return out, nil
}

func launcherOnce(socket, line string) launcherExchange {
	x := launcherExchange{Request: line}
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		x.Err = err.Error()
		return x
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		x.Err = err.Error()
		return x
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	x.Reply = strings.TrimSpace(reply)
	if err != nil && x.Reply == "" {
		x.Err = err.Error()
	}
	// Keep the decoded form honest: a reply must be one JSON object.
	if x.Reply != "" && !json.Valid([]byte(x.Reply)) {
		x.Err = "the reply is not JSON"
	}
	return x
}
