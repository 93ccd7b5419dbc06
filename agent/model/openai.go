package model

import (
	"context"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// openAIModel talks to an OpenAI-compatible Chat Completions API through
// the relay (<base>/openai; the SDK appends /chat/completions).
type openAIModel struct {
	name string
	chat openai.ChatCompletionService
}

func newOpenAI(name string, cfg Config) *openAIModel {
	// A bare service, not openai.NewClient: NewClient would read OPENAI_*
	// variables from the environment.
	svc := openai.NewChatCompletionService(
		option.WithBaseURL(joinURL(cfg.BaseURL, "openai")+"/"),
		option.WithAPIKey(cfg.Token),
		option.WithHTTPClient(cfg.httpClient()),
		option.WithRequestTimeout(cfg.timeout()),
		option.WithMaxRetries(cfg.retries()),
	)
	return &openAIModel{name: name, chat: svc}
}

func (m *openAIModel) Name() string { return "openai:" + m.name }

func (m *openAIModel) Complete(ctx context.Context, req Request) (Response, error) {
	params := openai.ChatCompletionNewParams{
		Model:    shared.ChatModel(m.name),
		Messages: openAIMessages(req.System, req.Messages),
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        ToolName,
			Description: openai.String(ToolDescription),
			Parameters:  shared.FunctionParameters(toolSchema),
		})},
	}
	if req.MaxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(req.MaxTokens)
	}
	resp, err := m.chat.New(ctx, params)
	if err != nil {
		return Response{}, fmt.Errorf("asking %s: %w", m.Name(), err)
	}
	out := Response{Usage: Usage{InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens}}
	if len(resp.Choices) == 0 {
		return out, fmt.Errorf("asking %s: the reply has no choices", m.Name())
	}
	choice := resp.Choices[0]
	out.StopReason = choice.FinishReason
	out.Text = choice.Message.Content
	for _, tc := range choice.Message.ToolCalls {
		out.Calls = append(out.Calls, decodeCall(tc.ID, tc.Function.Name, []byte(tc.Function.Arguments)))
	}
	return out, nil
}

func openAIMessages(system string, msgs []Message) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if system != "" {
		out = append(out, openai.SystemMessage(system))
	}
	for _, m := range msgs {
		switch m.Role {
		case Assistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Text != "" {
				a.Content.OfString = openai.String(m.Text)
			}
			for _, c := range m.Calls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      ToolName,
							Arguments: codeArguments(c.Code),
						},
					},
				})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			for _, r := range m.Results {
				out = append(out, openai.ToolMessage(r.Content, r.CallID))
			}
			if m.Text != "" {
				out = append(out, openai.UserMessage(m.Text))
			}
		}
	}
	return out
}
