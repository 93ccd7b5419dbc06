package model

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"ironcurtain.dev/compiler"
)

const openAIDefaultEndpoint = "https://api.openai.com/v1"

type openAIModel struct {
	client   openai.Client
	name     string
	endpoint string
}

var _ compiler.Model = (*openAIModel)(nil)

func newOpenAI(cfg Config) *openAIModel {
	opts := []option.RequestOption{option.WithAPIKey(cfg.APIKey), option.WithRequestTimeout(timeout(cfg))}
	endpoint := openAIDefaultEndpoint
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
		endpoint = cfg.BaseURL
	}
	if cfg.MaxRetries >= 0 {
		opts = append(opts, option.WithMaxRetries(cfg.MaxRetries))
	}
	return &openAIModel{client: openai.NewClient(opts...), name: cfg.Spec.Name, endpoint: endpoint}
}

// Complete sends p to the Chat Completions API and returns the first choice.
func (m *openAIModel) Complete(ctx context.Context, p compiler.Prompt) (compiler.Reply, error) {
	params := openai.ChatCompletionNewParams{
		Model:               m.name,
		MaxCompletionTokens: openai.Int(int64(maxTokens(p))),
	}
	if p.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(p.System))
	}
	for _, msg := range p.Messages {
		if msg.Role == compiler.Assistant {
			params.Messages = append(params.Messages, openai.AssistantMessage(msg.Content))
		} else {
			params.Messages = append(params.Messages, openai.UserMessage(msg.Content))
		}
	}
	resp, err := m.client.Chat.Completions.New(ctx, params)
	if err != nil {
		var apiErr *openai.Error
		status := 0
		if errors.As(err, &apiErr) {
			status = apiErr.StatusCode
		}
		return compiler.Reply{}, describe(OpenAI, m.endpoint, status, err)
	}
	if len(resp.Choices) == 0 {
		return compiler.Reply{}, fmt.Errorf("calling %s at %s: reply has no choices", OpenAI, m.endpoint)
	}
	return compiler.Reply{
		Text:  resp.Choices[0].Message.Content,
		Usage: compiler.Usage{InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens},
	}, nil
}

func maxTokens(p compiler.Prompt) int {
	if p.MaxTokens > 0 {
		return p.MaxTokens
	}
	return DefaultMaxTokens
}

func timeout(cfg Config) time.Duration {
	if cfg.Timeout > 0 {
		return cfg.Timeout
	}
	return DefaultTimeout
}
