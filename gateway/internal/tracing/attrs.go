package tracing

import "go.opentelemetry.io/otel/attribute"

// Attribute keys of the gateway's spans. Only ids, names and numbers: see
// the package comment for what never goes into an attribute.
const (
	SessionID    = attribute.Key("ironcurtain.session_id")
	CallID       = attribute.Key("ironcurtain.call_id")
	Server       = attribute.Key("ironcurtain.server")
	Tool         = attribute.Key("ironcurtain.tool")
	Decision     = attribute.Key("ironcurtain.decision")
	Rule         = attribute.Key("ironcurtain.rule")
	Outcome      = attribute.Key("ironcurtain.outcome")
	EscalationID = attribute.Key("ironcurtain.escalation_id")
	Escalation   = attribute.Key("ironcurtain.escalation_status")
	PolicyVer    = attribute.Key("ironcurtain.policy_version")
	Kind         = attribute.Key("ironcurtain.egress_kind")
	Host         = attribute.Key("server.address")
	Port         = attribute.Key("server.port")
	BytesUp      = attribute.Key("ironcurtain.bytes_up")
	BytesDown    = attribute.Key("ironcurtain.bytes_down")
	ResultBytes  = attribute.Key("ironcurtain.result_bytes")
	LLMProvider  = attribute.Key("gen_ai.system")
	Model        = attribute.Key("gen_ai.request.model")
	InputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	OutputTokens = attribute.Key("gen_ai.usage.output_tokens")
	StatusCode   = attribute.Key("http.response.status_code")
	Stream       = attribute.Key("ironcurtain.stream")
)
