package model

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// anthropicModel talks to the Messages API through the relay
// (<base>/anthropic; the SDK appends /v1/messages).
type anthropicModel struct {
	name     string
	messages anthropic.MessageService
}

func newAnthropic(name string, cfg Config) *anthropicModel {
	// A bare service, not anthropic.NewClient: NewClient would read
	// ANTHROPIC_* variables and credential profiles from the environment.
	svc := anthropic.NewMessageService(
		option.WithBaseURL(joinURL(cfg.BaseURL, "anthropic")+"/"),
		option.WithAPIKey(cfg.Token),
		option.WithHTTPClient(cfg.httpClient()),
		option.WithRequestTimeout(cfg.timeout()),
		option.WithMaxRetries(cfg.retries()),
	)
	return &anthropicModel{name: name, messages: svc}
}

func (m *anthropicModel) Name() string { return "anthropic:" + m.name }

func (m *anthropicModel) Complete(ctx context.Context, req Request) (Response, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(m.name),
		MaxTokens: req.MaxTokens,
		Messages:  anthropicMessages(req.Messages),
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name:        ToolName,
			Description: anthropic.String(ToolDescription),
			InputSchema: anthropic.ToolInputSchemaParam{
				Properties: toolSchema["properties"],
				Required:   []string{"code"},
			},
		}}},
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	msg, err := m.messages.New(ctx, params)
	if err != nil {
		return Response{}, fmt.Errorf("asking %s: %w", m.Name(), err)
	}
	out := Response{
		StopReason: string(msg.StopReason),
		Usage:      Usage{InputTokens: msg.Usage.InputTokens + msg.Usage.CacheCreationInputTokens + msg.Usage.CacheReadInputTokens, OutputTokens: msg.Usage.OutputTokens},
	}
	for _, block := range msg.Content {
		switch block.Type {
		case "text":
			if out.Text != "" {
				out.Text += "\n"
			}
			out.Text += block.Text
		case "tool_use":
			out.Calls = append(out.Calls, decodeCall(block.ID, block.Name, block.Input))
		}
	}
	return out, nil
}

func anthropicMessages(msgs []Message) []anthropic.MessageParam {
	out := make([]anthropic.MessageParam, 0, len(msgs))
	for _, m := range msgs {
		var blocks []anthropic.ContentBlockParamUnion
		switch m.Role {
		case Assistant:
			if m.Text != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Text))
			}
			for _, c := range m.Calls {
				blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, map[string]any{"code": c.Code}, ToolName))
			}
			out = append(out, anthropic.NewAssistantMessage(blocks...))
		default:
			for _, r := range m.Results {
				blocks = append(blocks, anthropic.NewToolResultBlock(r.CallID, r.Content, r.IsError))
			}
			if m.Text != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Text))
			}
			out = append(out, anthropic.NewUserMessage(blocks...))
		}
	}
	return out
}

// decodeCall reads an execute_code call's JSON input.
func decodeCall(id, name string, input []byte) ToolCall {
	call := ToolCall{ID: id}
	if name != ToolName {
		call.Invalid = fmt.Sprintf("there is no tool %q; the only tool is %s", name, ToolName)
		return call
	}
	var in struct {
		Code *string `json:"code"`
	}
	if err := json.Unmarshal(input, &in); err != nil || in.Code == nil {
		call.Invalid = ToolName + " needs an object with a `code` string"
		return call
	}
	call.Code = *in.Code
	return call
}
