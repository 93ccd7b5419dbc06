package gitwire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"ironcurtain.dev/gateway/gitref"
)

// Limits bound what one receive-pack request may hold.
type Limits struct {
	// MaxCommands is the most ref updates in one push.
	MaxCommands int
	// MaxPushOptions is the most push options; 0 refuses any.
	MaxPushOptions int
	// DeferRefCheck leaves gitref.CheckUpdateRef to the caller, which then
	// must apply it to every command (policy.PushChecker.CheckUpdates
	// does), so that a refused ref name is reported on that ref like any
	// other refusal. Ref names must still be printable ASCII without
	// spaces, at most MaxRefName bytes.
	DeferRefCheck bool
}

// MaxRefName bounds a ref name when DeferRefCheck is set.
const MaxRefName = 1024

// Default limits.
const (
	DefaultMaxCommands    = 256
	DefaultMaxPushOptions = 0
)

// DefaultLimits are the limits a zero Limits stands for.
func DefaultLimits() Limits {
	return Limits{MaxCommands: DefaultMaxCommands, MaxPushOptions: DefaultMaxPushOptions}
}

// Command is one ref update a client asks for: "old new ref". The ids are
// what the client claims; only the objects can say whether an update is a
// fast-forward.
type Command struct {
	Old, New string // lower-case hex object ids; all zeros = none
	Ref      string // full ref name
}

// IsCreate reports whether the client claims the ref does not exist yet.
func (c Command) IsCreate() bool { return isZeroID(c.Old) }

// IsDelete reports whether the command deletes the ref.
func (c Command) IsDelete() bool { return isZeroID(c.New) }

// UpdateRequest is the part of a receive-pack request before the pack.
type UpdateRequest struct {
	Commands     []Command
	Capabilities Capabilities
	PushOptions  []string
}

// NeedsPack reports whether a pack follows the request: git sends none when
// every command is a deletion.
func (u UpdateRequest) NeedsPack() bool {
	for _, c := range u.Commands {
		if !c.IsDelete() {
			return true
		}
	}
	return false
}

// Capabilities are those a client asked for on its first command line.
type Capabilities struct {
	ReportStatus   bool // report-status or report-status-v2
	ReportStatusV2 bool
	SideBand       bool // side-band (small packets)
	SideBand64k    bool
	Quiet          bool
	Atomic         bool
	DeleteRefs     bool
	OfsDelta       bool
	PushOptions    bool
	Agent          string
	ObjectFormat   string // "" (sha1) or what the client named
}

// Band returns the side band the client asked for: 0 none, else the largest
// payload of one side-band packet (band byte excluded).
func (c Capabilities) Band() int {
	switch {
	case c.SideBand64k:
		return MaxPayload - 1
	case c.SideBand:
		return 999 - 4 - 1
	}
	return 0
}

// ReadUpdateRequest reads the ref-update commands, capabilities and push
// options of a receive-pack request from r (which may then stream the pack
// through r.Rest). objectFormat is the repository's ("sha1" or "sha256")
// and fixes the length of object ids.
//
// Refused, each with an error wrapping ErrProtocol that names the problem:
// shallow lines and push certificates (not supported), an empty command list,
// a command that is not "old SP new SP ref", ids of the wrong length or case,
// both ids zero, an invalid ref name (gitref.CheckUpdateRef), the same ref
// twice, more commands or push options than the limits allow, capabilities
// after the first line, unknown or repeated capabilities, an object format
// other than the repository's, push options without the capability,
// delim-pkts and response-end-pkts anywhere, and a stream that ends early.
// On error the request returned holds only the capabilities, once the first
// line was read, so that the caller can answer in the client's side band.
func ReadUpdateRequest(r *Reader, objectFormat string, lim Limits) (UpdateRequest, error) {
	if lim.MaxCommands <= 0 {
		lim.MaxCommands = DefaultMaxCommands
	}
	idLen, err := idLength(objectFormat)
	if err != nil {
		return UpdateRequest{}, err
	}
	var u UpdateRequest
	seen := map[string]bool{}
	for {
		kind, p, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return u.partial(), protoErr("the command list ended without a flush-pkt")
			}
			return u.partial(), fmt.Errorf("reading the command list: %w", err)
		}
		if kind == Flush {
			break
		}
		if kind != Data {
			return u.partial(), protoErr("unexpected %s in the command list", kind)
		}
		line := p
		if len(u.Commands) == 0 {
			if bytes.HasPrefix(line, []byte("shallow ")) {
				return u.partial(), protoErr("pushing from a shallow clone is not supported")
			}
			if bytes.HasPrefix(line, []byte("push-cert")) {
				return u.partial(), protoErr("signed pushes are not supported")
			}
			cmd, caps, hasCaps := bytes.Cut(line, []byte{0})
			if !hasCaps {
				return u.partial(), protoErr("the first command carries no capability list")
			}
			if u.Capabilities, err = parseCapabilities(string(trimLF(caps)), objectFormat); err != nil {
				return u.partial(), err
			}
			line = cmd
		} else if bytes.IndexByte(line, 0) >= 0 {
			return u.partial(), protoErr("capabilities after the first command")
		}
		if len(u.Commands) == lim.MaxCommands {
			return u.partial(), protoErr("more than %d ref updates in one push", lim.MaxCommands)
		}
		c, err := parseCommand(string(trimLF(line)), idLen, lim.DeferRefCheck)
		if err != nil {
			return u.partial(), err
		}
		if seen[c.Ref] {
			return u.partial(), protoErr("ref %s is updated twice", c.Ref)
		}
		seen[c.Ref] = true
		u.Commands = append(u.Commands, c)
	}
	if len(u.Commands) == 0 {
		return u.partial(), protoErr("the push holds no ref update")
	}
	if u.Capabilities.PushOptions {
		if u.PushOptions, err = readPushOptions(r, lim.MaxPushOptions); err != nil {
			return u.partial(), err
		}
	}
	return u, nil
}

// partial is what a refused request keeps: its capabilities.
func (u UpdateRequest) partial() UpdateRequest {
	return UpdateRequest{Capabilities: u.Capabilities}
}

func readPushOptions(r *Reader, max int) ([]string, error) {
	var opts []string
	for {
		kind, p, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, protoErr("the push options ended without a flush-pkt")
			}
			return nil, fmt.Errorf("reading push options: %w", err)
		}
		switch kind {
		case Flush:
			return opts, nil
		case Data:
		default:
			return nil, protoErr("unexpected %s in the push options", kind)
		}
		if len(opts) >= max {
			if max == 0 {
				return nil, protoErr("push options are not accepted")
			}
			return nil, protoErr("more than %d push options", max)
		}
		o := string(trimLF(p))
		if !printableASCII(o) {
			return nil, protoErr("push option %q is not printable ASCII", clip(o))
		}
		opts = append(opts, o)
	}
}

// knownCapabilities are those a client may ask for; all others are refused.
var knownCapabilities = map[string]bool{
	"report-status": true, "report-status-v2": true, "side-band": true, "side-band-64k": true,
	"quiet": true, "atomic": true, "delete-refs": true, "ofs-delta": true, "push-options": true,
	"agent": true, "object-format": true,
}

func parseCapabilities(list, objectFormat string) (Capabilities, error) {
	var c Capabilities
	seen := map[string]bool{}
	for _, w := range strings.Split(list, " ") {
		if w == "" {
			continue // git writes a leading space after the NUL
		}
		name, value, hasValue := strings.Cut(w, "=")
		if !knownCapabilities[name] {
			return Capabilities{}, protoErr("capability %q is not supported", clip(name))
		}
		if seen[name] {
			return Capabilities{}, protoErr("capability %q is repeated", name)
		}
		seen[name] = true
		if hasValue != (name == "agent" || name == "object-format") {
			return Capabilities{}, protoErr("capability %q is malformed", clip(w))
		}
		switch name {
		case "report-status":
			c.ReportStatus = true
		case "report-status-v2":
			c.ReportStatus, c.ReportStatusV2 = true, true
		case "side-band":
			c.SideBand = true
		case "side-band-64k":
			c.SideBand64k = true
		case "quiet":
			c.Quiet = true
		case "atomic":
			c.Atomic = true
		case "delete-refs":
			c.DeleteRefs = true
		case "ofs-delta":
			c.OfsDelta = true
		case "push-options":
			c.PushOptions = true
		case "agent":
			if value == "" || len(value) > 256 || !printableASCII(value) {
				return Capabilities{}, protoErr("capability agent has an invalid value")
			}
			c.Agent = value
		case "object-format":
			if value != objectFormat {
				return Capabilities{}, protoErr("object format %q does not match the repository's %q", clip(value), objectFormat)
			}
			c.ObjectFormat = value
		}
	}
	return c, nil
}

func parseCommand(line string, idLen int, deferRefCheck bool) (Command, error) {
	parts := strings.Split(line, " ")
	if len(parts) != 3 {
		return Command{}, protoErr("malformed ref update %q", clip(line))
	}
	c := Command{Old: parts[0], New: parts[1], Ref: parts[2]}
	for _, id := range []string{c.Old, c.New} {
		if !isObjectID(id, idLen) {
			return Command{}, protoErr("malformed object id %q in the update of %q", clip(id), clip(c.Ref))
		}
	}
	if c.IsCreate() && c.IsDelete() {
		return Command{}, protoErr("the update of %q has two zero ids", clip(c.Ref))
	}
	if deferRefCheck {
		if c.Ref == "" || len(c.Ref) > MaxRefName || !printableASCII(c.Ref) {
			return Command{}, protoErr("ref name %q is not printable ASCII of at most %d bytes", clip(c.Ref), MaxRefName)
		}
	} else if err := gitref.CheckUpdateRef(c.Ref); err != nil {
		return Command{}, protoErr("refusing ref: %v", err)
	}
	return c, nil
}

func idLength(format string) (int, error) {
	switch format {
	case "sha1":
		return 40, nil
	case "sha256":
		return 64, nil
	}
	return 0, fmt.Errorf("unknown object format %q", format)
}

func isObjectID(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func isZeroID(s string) bool { return s != "" && strings.Trim(s, "0") == "" }

func trimLF(p []byte) []byte { return bytes.TrimSuffix(p, []byte{'\n'}) }

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// clip bounds a quoted value in an error message.
func clip(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
