package launcher

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"ironcurtain.dev/gateway/strictjson"
)

// Operations a request may ask for.
const (
	OpStart  = "start"
	OpStop   = "stop"
	OpAttach = "attach"
)

// MaxRequestBytes bounds one request line.
const MaxRequestBytes = 1024

// Request is everything a client may say: an operation, a server name and
// the token. Any other field is refused by ParseRequest.
type Request struct {
	Op     string `json:"op"`
	Server string `json:"server"`
	Token  string `json:"token"`
}

// Reply answers a request. On success for start and attach, the stream
// follows the reply line.
type Reply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Image is the image the launcher runs for the server (so the gateway
	// can check it is the one gateway.yaml names).
	Image string `json:"image,omitempty"`
}

// ErrBadRequest wraps every refusal of ParseRequest.
var ErrBadRequest = errors.New("bad launcher request")

var requestLimits = strictjson.Limits{MaxBytes: MaxRequestBytes, MaxDepth: 1, MaxMembers: 3, MaxElements: 1, MaxString: 256}

// ParseRequest decodes one request strictly: exact names, no duplicates,
// no unknown names, nothing after the object; then checks the values.
func ParseRequest(line []byte) (Request, error) {
	var r Request
	if err := strictjson.Decode(line, &r, requestLimits); err != nil {
		return Request{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	switch r.Op {
	case OpStart, OpStop, OpAttach:
	default:
		return Request{}, fmt.Errorf("%w: op must be start, stop or attach", ErrBadRequest)
	}
	if !ServerNameRE.MatchString(r.Server) {
		return Request{}, fmt.Errorf("%w: server is not a server name", ErrBadRequest)
	}
	if r.Token == "" {
		return Request{}, fmt.Errorf("%w: token is missing", ErrBadRequest)
	}
	return r, nil
}

// ProxyIdentity is the proxy password of server name: an HMAC of the name
// under the shared token. The launcher puts it in the server's proxy
// variables and the gateway's egress proxy recognises it, so neither side
// has to send it, and one server cannot take another's identity.
func ProxyIdentity(token []byte, name string) string {
	m := hmac.New(sha256.New, token)
	m.Write([]byte("ironcurtain server proxy identity\x00" + name))
	return hex.EncodeToString(m.Sum(nil))
}
