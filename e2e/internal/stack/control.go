package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// stopTimeout is how long a stopped container gets before SIGKILL (the
// Docker default).
const stopTimeout = 10 * time.Second

// OpsURL is the ops API's base URL on the host (127.0.0.1 and the port
// Docker chose; it changes when the gateway restarts).
func (s *Stack) OpsURL(ctx context.Context) (string, error) {
	p, err := s.Gateway.MappedPort(ctx, "8081/tcp")
	if err != nil {
		return "", fmt.Errorf("finding the ops port: %w", err)
	}
	return "http://127.0.0.1:" + p.Port(), nil
}

// WaitGatewayReady polls the ops API's /readyz (Postgres reachable, schema
// current) until it answers 200.
func (s *Stack) WaitGatewayReady(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var last string
	for {
		if st, err := s.Gateway.State(ctx); err == nil && !st.Running {
			return fmt.Errorf("the gateway exited (%d) before it was ready:\n%s", st.ExitCode, s.GatewayLogs(context.WithoutCancel(ctx)))
		}
		code, body, err := s.opsRequest(ctx, http.MethodGet, "/readyz", "", nil)
		if err == nil && code == http.StatusOK {
			return nil
		}
		last = fmt.Sprintf("%d %s %v", code, strings.TrimSpace(string(body)), err)
		if err := sleep(ctx, pollLong); err != nil {
			return fmt.Errorf("the gateway was not ready within %s (last /readyz: %s):\n%s", within, last, s.GatewayLogs(context.WithoutCancel(ctx)))
		}
	}
}

// Readyz returns the status code of the ops API's /readyz.
func (s *Stack) Readyz(ctx context.Context) (int, error) {
	code, _, err := s.opsRequest(ctx, http.MethodGet, "/readyz", "", nil)
	return code, err
}

// RestartGateway stops the gateway container (SIGTERM, then SIGKILL after
// stopTimeout, as `docker stop` does) and starts it again, waiting until it
// is ready. It returns how long the stop took and whether the gateway had
// to be killed (it did not exit within stopTimeout).
func (s *Stack) RestartGateway(ctx context.Context) (stopped time.Duration, killed bool, err error) {
	d := stopTimeout
	begin := time.Now()
	if err := s.Gateway.Stop(ctx, &d); err != nil {
		return 0, false, fmt.Errorf("stopping the gateway: %w", err)
	}
	stopped = time.Since(begin)
	if st, err := s.Gateway.State(ctx); err == nil {
		killed = st.ExitCode == 137
	}
	if err := s.Gateway.Start(ctx); err != nil {
		return stopped, killed, fmt.Errorf("starting the gateway again: %w", err)
	}
	return stopped, killed, s.WaitGatewayReady(ctx, 2*time.Minute)
}

// StopPostgres stops the database container (its data volume stays).
func (s *Stack) StopPostgres(ctx context.Context) error {
	d := stopTimeout
	if err := s.Postgres.Stop(ctx, &d); err != nil {
		return fmt.Errorf("stopping postgres: %w", err)
	}
	return nil
}

// StartPostgres starts the database container again and waits until it
// accepts connections.
func (s *Stack) StartPostgres(ctx context.Context) error {
	if err := s.Postgres.Start(ctx); err != nil {
		return fmt.Errorf("starting postgres again: %w", err)
	}
	return nil
}

// KillPostgres kills the database container at once (SIGKILL, as `docker
// kill`): no shutdown checkpoint, open connections break mid-statement.
// StartPostgres brings it back (crash recovery from its data volume).
func (s *Stack) KillPostgres(ctx context.Context) error {
	if _, err := s.cli.ContainerKill(ctx, s.Postgres.ID, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("killing postgres: %w", err)
	}
	return nil
}

// PausePostgres freezes the database container (`docker pause`): its
// connections stay open and answer nothing until UnpausePostgres.
func (s *Stack) PausePostgres(ctx context.Context) error {
	if _, err := s.cli.ContainerPause(ctx, s.Postgres.ID, client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("pausing postgres: %w", err)
	}
	return nil
}

// UnpausePostgres thaws a paused database container.
func (s *Stack) UnpausePostgres(ctx context.Context) error {
	if _, err := s.cli.ContainerUnpause(ctx, s.Postgres.ID, client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("unpausing postgres: %w", err)
	}
	return nil
}

// GatewayLogs returns the gateway container's logs (stdout and stderr).
func (s *Stack) GatewayLogs(ctx context.Context) string { return containerLogs(ctx, s.Gateway) }

// InternetLogs returns the internet container's request log.
func (s *Stack) InternetLogs(ctx context.Context) string { return containerLogs(ctx, s.Internet) }

// PostgresLogs returns the database container's logs.
func (s *Stack) PostgresLogs(ctx context.Context) string { return containerLogs(ctx, s.Postgres) }

func containerLogs(ctx context.Context, c *testcontainers.DockerContainer) string {
	if c == nil {
		return "(no container)"
	}
	rc, err := c.Logs(ctx)
	if err != nil {
		return "(logs unavailable: " + err.Error() + ")"
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 4<<20))
	return string(b)
}

// InternetRequest is one line of the internet container's request log.
type InternetRequest struct {
	Host   string `json:"host"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Status int    `json:"status"`
	TLS    bool   `json:"tls"`
	Note   string `json:"note"`
}

// InternetRequests parses the internet container's request log.
func (s *Stack) InternetRequests(ctx context.Context) ([]InternetRequest, error) {
	var out []InternetRequest
	for _, line := range strings.Split(s.InternetLogs(ctx), "\n") {
		i := strings.IndexByte(line, '{')
		if i < 0 || !strings.Contains(line, `"msg":"request"`) {
			continue
		}
		var r InternetRequest
		if err := json.Unmarshal([]byte(line[i:]), &r); err != nil {
			return nil, fmt.Errorf("parsing the internet log line %q: %w", line, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// opsRequest calls the ops API with the operator token (or token when
// not empty, "-" for none).
func (s *Stack) opsRequest(ctx context.Context, method, path, token string, body any) (int, []byte, error) {
	base, err := s.OpsURL(ctx)
	if err != nil {
		return 0, nil, err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	switch token {
	case "":
		req.Header.Set("Authorization", "Bearer "+s.Secrets.OperatorToken)
	case "-":
	default:
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, b, err
}

// OpsStatus calls the ops API with an explicit bearer token ("-": none)
// and returns the status code, for authorisation checks.
func (s *Stack) OpsStatus(ctx context.Context, method, path, token string) (int, error) {
	code, _, err := s.opsRequest(ctx, method, path, token, nil)
	return code, err
}

// Escalation is the ops API's view of an escalation.
type Escalation struct {
	ID             string          `json:"id"`
	CallID         string          `json:"call_id"`
	SessionID      string          `json:"session_id"`
	Kind           string          `json:"kind"`
	Server         string          `json:"server"`
	Tool           string          `json:"tool"`
	Args           json.RawMessage `json:"args"`
	Rule           string          `json:"rule"`
	Reason         string          `json:"reason"`
	Resource       string          `json:"resource"`
	Status         string          `json:"status"`
	DecidedBy      string          `json:"decided_by"`
	DecisionReason string          `json:"decision_reason"`
	// Auto is the auto-approver's verdict (nil: not consulted).
	Auto *AutoReview `json:"auto"`
}

// Escalations lists escalations of a session (status "" = any).
func (s *Stack) Escalations(ctx context.Context, session, status string) ([]Escalation, error) {
	path := "/v1/escalations?session=" + session
	if status != "" {
		path += "&status=" + status
	}
	code, body, err := s.opsRequest(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", path, code, body)
	}
	var out struct {
		Escalations []Escalation `json:"escalations"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return out.Escalations, nil
}

// Escalation returns one escalation.
func (s *Stack) Escalation(ctx context.Context, id string) (Escalation, error) {
	var e Escalation
	code, body, err := s.opsRequest(ctx, http.MethodGet, "/v1/escalations/"+id, "", nil)
	if err != nil {
		return e, err
	}
	if code != http.StatusOK {
		return e, fmt.Errorf("GET escalation %s: %d %s", id, code, body)
	}
	return e, json.Unmarshal(body, &e)
}

// AutoReview is the auto-approver's verdict on an escalation.
type AutoReview struct {
	Verdict   string `json:"verdict"`
	Outcome   string `json:"outcome"`
	Model     string `json:"model"`
	Reasoning string `json:"reasoning"`
}

// WaitPending waits for a pending escalation of session on server__tool
// that is not in seen, and returns it.
func (s *Stack) WaitPending(ctx context.Context, session, server, tool string, within time.Duration, seen ...string) (Escalation, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		list, err := s.Escalations(ctx, session, "pending")
		if err == nil {
		next:
			for _, e := range list {
				for _, id := range seen {
					if e.ID == id {
						continue next
					}
				}
				if e.Server == server && e.Tool == tool {
					return e, nil
				}
			}
		}
		if err := sleep(ctx, pollLong); err != nil {
			var other []string
			for _, e := range list {
				other = append(other, e.Server+"__"+e.Tool+" "+string(e.Args))
			}
			return Escalation{}, fmt.Errorf("no pending escalation of %s__%s for session %s within %s (pending: %v)", server, tool, session, within, other)
		}
	}
}

// Decide approves or denies an escalation through the ops API, as the
// operator. similar is "" or an approve-similar scope.
func (s *Stack) Decide(ctx context.Context, id string, approve bool, reason, similar string) (Escalation, error) {
	verb := "deny"
	if approve {
		verb = "approve"
	}
	body := map[string]string{"reason": reason}
	if similar != "" {
		body["similar"] = similar
	}
	var e Escalation
	code, out, err := s.opsRequest(ctx, http.MethodPost, "/v1/escalations/"+id+"/"+verb, "", body)
	if err != nil {
		return e, err
	}
	if code != http.StatusOK {
		return e, fmt.Errorf("POST %s escalation %s: %d %s", verb, id, code, out)
	}
	return e, json.Unmarshal(out, &e)
}

// GatewayPaths lists the entries under path in the gateway container
// (nil when path does not exist).
func (s *Stack) GatewayPaths(ctx context.Context, path string) ([]string, error) {
	return pathsIn(ctx, s.cli, s.Gateway.ID, path)
}

// GatewayFile reads a file in the gateway container (os.ErrNotExist when
// it is absent).
func (s *Stack) GatewayFile(ctx context.Context, path string) ([]byte, error) {
	return fileIn(ctx, s.cli, s.Gateway.ID, path)
}

// WorkspaceFile reads a file of the shared workspace (through the gateway
// container, which mounts it).
func (s *Stack) WorkspaceFile(ctx context.Context, rel string) ([]byte, error) {
	return fileIn(ctx, s.cli, s.Gateway.ID, workspace+"/"+strings.TrimPrefix(rel, "/"))
}

// WorkspaceExists reports whether a workspace path exists.
func (s *Stack) WorkspaceExists(ctx context.Context, rel string) (bool, error) {
	_, err := s.WorkspaceFile(ctx, rel)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case strings.Contains(err.Error(), "not a regular file"):
		return true, nil
	}
	return false, err
}

// ExecGateway runs a command in the gateway container (its environment
// includes the database URL, so `ironcurtain audit verify` works there).
func (s *Stack) ExecGateway(ctx context.Context, cmd ...string) (ExecResult, error) {
	return execIn(ctx, s.cli, s.Gateway.ID, cmd, nil, nil)
}

// ExecInternet runs a command in the internet container (as root).
func (s *Stack) ExecInternet(ctx context.Context, cmd ...string) (ExecResult, error) {
	return execIn(ctx, s.cli, s.Internet.ID, cmd, nil, nil)
}

// RemoteGit runs git against the bare repository served by the internet
// container.
func (s *Stack) RemoteGit(ctx context.Context, args ...string) (string, error) {
	r, err := s.ExecInternet(ctx, append([]string{"git", "--git-dir", "/srv/git/" + GitRepo + ".git"}, args...)...)
	if err != nil {
		return "", err
	}
	if r.Code != 0 {
		return "", fmt.Errorf("git %s on the remote: %s", strings.Join(args, " "), r)
	}
	return strings.TrimSpace(r.Stdout), nil
}

// RemoteRepoGit runs git against a bare repository (GitRepo, OwnerRepo)
// served by the internet container.
func (s *Stack) RemoteRepoGit(ctx context.Context, repo string, args ...string) (string, error) {
	r, err := s.ExecInternet(ctx, append([]string{"git", "--git-dir", "/srv/git/" + repo + ".git"}, args...)...)
	if err != nil {
		return "", err
	}
	if r.Code != 0 {
		return "", fmt.Errorf("git %s on the remote %s: %s", strings.Join(args, " "), repo, r)
	}
	return strings.TrimSpace(r.Stdout), nil
}

// ScanFilesystem exports a container's filesystem (every file, whatever
// its permissions; volumes excluded) and reports every file that holds one
// of secrets (name → value).
func (s *Stack) ScanFilesystem(ctx context.Context, c *testcontainers.DockerContainer, secrets map[string]string) (files int, found []ScanResult, err error) {
	return scanExport(ctx, s.cli, c.ID, secrets)
}

// AgentConfigEnv returns the agent container's configured environment
// (docker inspect), as KEY=VALUE.
func (s *Stack) AgentConfigEnv(ctx context.Context) ([]string, error) {
	ins, err := s.Agent.Inspect(ctx)
	if err != nil {
		return nil, fmt.Errorf("inspecting the agent container: %w", err)
	}
	return ins.Config.Env, nil
}

// ApproveWithCLI approves an escalation the way an operator does on the
// gateway host: `ironcurtain escalations approve ID --reason R --json`,
// run in the gateway container (the CLI talks to the ops API on the ops
// network's address with IRONCURTAIN_OPERATOR_TOKEN from the environment).
func (s *Stack) ApproveWithCLI(ctx context.Context, id, reason string) (Escalation, error) {
	var e Escalation
	r, err := s.ExecGateway(ctx, "ironcurtain", "escalations", "approve", id, "--reason", reason, "--json",
		"--ops-url", "http://"+s.opsHost+":8081")
	if err != nil {
		return e, err
	}
	if r.Code != 0 {
		return e, fmt.Errorf("ironcurtain escalations approve: %s", r)
	}
	if err := json.Unmarshal([]byte(r.Stdout), &e); err != nil {
		return e, fmt.Errorf("ironcurtain escalations approve --json printed %q: %w", r.Stdout, err)
	}
	return e, nil
}
