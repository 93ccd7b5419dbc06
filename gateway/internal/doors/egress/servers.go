package egress

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"ironcurtain.dev/gateway/netpolicy"
	"ironcurtain.dev/gateway/policy"
)

// ServerSessionPrefix starts the session id under which an image server's
// egress is decided and recorded: "server:<name>".
const ServerSessionPrefix = "server:"

// ruleServerAllowlist is the rule of a decision on a server's own
// allowlist (servers.<name>.egress.allowed_hosts).
const ruleServerAllowlist = "servers.egress.allowed_hosts"

// ServerIdentity is the proxy identity of an image: server: the password of
// its Proxy-Authorization (launcher.ProxyIdentity) and the hosts it alone
// may reach. Its requests never escalate and never use session approvals.
type ServerIdentity struct {
	Name  string
	Token string
	Allow []netpolicy.Pattern
}

// serverIdentities finds a server by its proxy token or its session id.
type serverIdentities struct {
	list      []ServerIdentity
	bySession map[string]*ServerIdentity
}

func newServerIdentities(ids []ServerIdentity) (serverIdentities, error) {
	s := serverIdentities{list: append([]ServerIdentity(nil), ids...), bySession: map[string]*ServerIdentity{}}
	for i := range s.list {
		id := &s.list[i]
		if id.Name == "" || len(id.Token) < 32 {
			return serverIdentities{}, fmt.Errorf("server identity %q: a name and a token of at least 32 characters are required", id.Name)
		}
		if _, dup := s.bySession[ServerSessionPrefix+id.Name]; dup {
			return serverIdentities{}, fmt.Errorf("server identity %q: duplicate", id.Name)
		}
		s.bySession[ServerSessionPrefix+id.Name] = id
	}
	for i := range s.list {
		for j := range i {
			if s.list[i].Token == s.list[j].Token {
				return serverIdentities{}, errors.New("two server identities share a token")
			}
		}
	}
	return s, nil
}

// byToken returns the server whose token tok is (constant time per entry).
func (s serverIdentities) byToken(tok string) (*ServerIdentity, bool) {
	var found *ServerIdentity
	for i := range s.list {
		if subtle.ConstantTimeCompare([]byte(s.list[i].Token), []byte(tok)) == 1 {
			found = &s.list[i]
		}
	}
	return found, found != nil
}

// decideServerHost decides a request of server srv: its own allowlist
// only, and a secret in what leaves is refused outright.
func (p *Proxy) decideServerHost(st *reqState, srv *ServerIdentity, h netpolicy.Host, insp inspector) (string, string, *refusal) {
	pat, ok := netpolicy.FirstMatch(srv.Allow, h)
	if !ok {
		return "", "", &refusal{http.StatusForbidden, ruleServerAllowlist, "host " + h.String() + " is not in the allowlist of server " + srv.Name}
	}
	if sc := p.scanner(); insp != nil && sc.Detector() != nil {
		hits, err := insp(sc.Detector(), true)
		if err != nil {
			st.fail(err)
			return "", "", &refusal{http.StatusBadRequest, policy.RuleSecretEgress, errNoScan.Error()}
		}
		if len(hits) > 0 {
			p.metrics.secretFindings(hits)
			d, _ := sc.Decide("", hits)
			return "", "", &refusal{http.StatusForbidden, policy.RuleSecretEgress, d.Reason}
		}
	}
	return ruleServerAllowlist + "[" + pat.String() + "]", "host is in the allowlist of server " + srv.Name, nil
}

// serverOf returns the server whose session id session is.
func (p *Proxy) serverOf(session string) (*ServerIdentity, bool) {
	if !strings.HasPrefix(session, ServerSessionPrefix) {
		return nil, false
	}
	srv, ok := p.servers.bySession[session]
	return srv, ok
}
